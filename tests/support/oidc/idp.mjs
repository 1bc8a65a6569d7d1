// A real OpenID Provider for the integration tests: panva/oidc-provider (OpenID Certified).
//
// Run: node idp.mjs   with, in the environment,
//   IDP_PORT     the loopback port to listen on (0: any free port)
//   IDP_JWKS     the private JWKS it signs ID tokens with ({"keys": [...]}, made by the test)
//   IDP_CLIENTS  the registered clients, a JSON array of oidc-provider client metadata
//   IDP_USERS    optional, {"<login>": "<password>", ...}: only these users sign in, each with its
//                password (what `make run OIDC=1` sets); unset, any login with any password (the tests)
//   IDP_CLOCK_CONTROL  optional, "1": the provider's clock is real time plus an offset the test sets
//                with POST /__test/clock {"offset_ms": n} (the conformance harness, whose injected
//                clock the suites move forward, so that the ID tokens' iat and exp are its time)
// It prints one JSON line {"issuer": "http://127.0.0.1:<port>"} once it listens.
// Users: a login name at the devInteractions form; sub = the name, email = <name>@corp.example,
// email_verified false only for names starting with "unverified".
import crypto from 'node:crypto';
import http from 'node:http';
import querystring from 'node:querystring';
import Provider from 'oidc-provider';

const clients = JSON.parse(process.env.IDP_CLIENTS || '[]');
const jwks = JSON.parse(process.env.IDP_JWKS || '{"keys": []}');
const users = process.env.IDP_USERS ? JSON.parse(process.env.IDP_USERS) : null;
const server = http.createServer();
let offsetMs = 0;
if (process.env.IDP_CLOCK_CONTROL === '1') {
  const realNow = Date.now.bind(Date);
  Date.now = () => realNow() + offsetMs;  // epochTime, the adapter's expiries and jose all read it
}

function clockControl(handler) {
  if (process.env.IDP_CLOCK_CONTROL !== '1') return handler;
  return (req, res) => {
    if (req.method !== 'POST' || req.url !== '/__test/clock') return handler(req, res);
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', () => {
      let offset;
      try {
        offset = JSON.parse(Buffer.concat(chunks).toString('utf8')).offset_ms;
      } catch {
        offset = undefined;
      }
      if (!Number.isSafeInteger(offset)) {
        res.writeHead(400).end();
        return;
      }
      offsetMs = offset;
      res.writeHead(204).end();
    });
  };
}

function same(a, b) {
  const x = Buffer.from(String(a)), y = Buffer.from(String(b));
  return x.length === y.length && crypto.timingSafeEqual(x, y);
}

// With IDP_USERS, the devInteractions login form (which takes any password) is checked first:
// the form's body is read here, a wrong login or password gets a page saying so, and a right
// one goes on to the provider with the body it already read (its parser falls back to req.body).
function checkingPasswords(handler) {
  return (req, res) => {
    if (users === null || req.method !== 'POST' || !/^\/interaction\/[A-Za-z0-9_-]+$/.test(req.url.split('?')[0])) {
      return handler(req, res);
    }
    const chunks = [];
    let size = 0;
    req.on('data', (chunk) => {
      size += chunk.length;
      if (size > 56 * 1024) req.destroy(); else chunks.push(chunk);
    });
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const form = querystring.parse(raw);
      const known = typeof form.login === 'string' && Object.hasOwn(users, form.login);
      if (form.prompt === 'login' && !(known && same(users[form.login], form.password ?? ''))) {
        res.writeHead(401, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
        res.end('<!DOCTYPE html><title>Sign-in</title><h1>Sign-in</h1><p class="error">Wrong login or password.</p>'
                + `<p><a href="${req.url.split('?')[0]}">Try again</a></p>`);
        return;
      }
      req.body = raw;
      handler(req, res);
    });
  };
}

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
  server.on('request', clockControl(checkingPasswords(provider.callback())));
  process.stdout.write(JSON.stringify({ issuer }) + '\n');
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
