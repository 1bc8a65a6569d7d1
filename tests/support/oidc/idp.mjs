// A real OpenID Provider for the integration tests: panva/oidc-provider (OpenID Certified).
//
// Run: node idp.mjs   with, in the environment,
//   IDP_PORT     the loopback port to listen on (0: any free port)
//   IDP_JWKS     the private JWKS it signs ID tokens with ({"keys": [...]}, made by the test)
//   IDP_CLIENTS  the registered clients, a JSON array of oidc-provider client metadata
// It prints one JSON line {"issuer": "http://127.0.0.1:<port>"} once it listens.
// Users: any login name at the devInteractions form; sub = the name, email = <name>@corp.example,
// email_verified false only for names starting with "unverified".
import http from 'node:http';
import Provider from 'oidc-provider';

const clients = JSON.parse(process.env.IDP_CLIENTS || '[]');
const jwks = JSON.parse(process.env.IDP_JWKS || '{"keys": []}');
const server = http.createServer();

server.listen(Number(process.env.IDP_PORT || 0), '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    clients,
    jwks,
    pkce: { required: () => true },           // S256 only (the default methods)
    conformIdTokenClaims: false,              // email claims in the ID token too, not only at userinfo
    // Back-Channel Logout: a client registered with backchannel_logout_uri and
    // backchannel_logout_session_required gets sid in its ID tokens, and a logout token
    // (typ logout+jwt, sub and sid) when the user signs out at /session/end.
    features: { devInteractions: { enabled: true }, backchannelLogout: { enabled: true } },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    // The provider refuses to fetch special-use addresses (its SSRF guard, an undici
    // dispatcher); the tests' back-channel logout catcher and client JWKS live on loopback.
    fetch: (url, options) => {
      const { hostname } = new URL(url);
      if (hostname !== '127.0.0.1') throw new Error(`the test IdP fetches loopback only, not ${hostname}`);
      const { dispatcher, ...rest } = options;
      return globalThis.fetch(url, rest);
    },
    ttl: { AuthorizationCode: 60, IdToken: 300, AccessToken: 300, Session: 600, Interaction: 600, Grant: 600 },
    findAccount: async (ctx, sub) => ({
      accountId: sub,
      claims: async () => ({ sub, email: `${sub}@corp.example`, email_verified: !sub.startsWith('unverified'),
                             name: sub.toUpperCase() }),
    }),
  });
  provider.proxy = false;
  server.on('request', provider.callback());
  process.stdout.write(JSON.stringify({ issuer }) + '\n');
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
