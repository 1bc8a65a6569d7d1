"""helm/frontdoor renders, lints and validates offline, and keeps its security properties.

No helm binary, no cluster: ``helm-python-sdk`` embeds Helm's Go library (render = ``helm
template``, ``helm lint --strict``, values.schema.json); ``kubernetes-validate --strict``
holds the Kubernetes JSON schemas, used here for the oldest version the chart supports
(Chart.yaml ``kubeVersion``) and the newest it ships. Kinds that are CRDs (ServiceMonitor,
HTTPRoute, the CloudNativePG Cluster in deploy/) are validated with ``jsonschema`` against
strict subset schemas in helm/frontdoor/ci/crd-schemas/. One render per values variant is
shared by the module. Each check returns a list of problems; ``test_checks_catch_*`` feed
them a broken chart to show they fail.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import jsonschema
import kubernetes_validate as kv
import pytest
import yaml
from frontdoor_core.settings import ENV_NAMES, load_settings

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "frontdoor"
PRODUCTION_VALUES = CHART / "ci" / "production-values.yaml"
CRD_SCHEMAS = CHART / "ci" / "crd-schemas"
CNPG_CLUSTER = ROOT / "deploy" / "cnpg-cluster.yaml"
COMPOSE_FILE = ROOT / "docker-compose.yml"
RUN_PY = ROOT / "tools" / "devstack" / "src" / "frontdoor_devstack" / "run.py"

OLDEST_K8S = "1.29.0"
NEWEST_K8S = "1.37.0"
RELEASE, NAMESPACE = "fd", "frontdoor"
PREFIX = f"{RELEASE}-frontdoor-"

HTTP_PORTS = {"console": 8000, "issuer": 8001, "ledger": 8002}
INTERNET = {"console", "issuer", "deliverer", "worker"}
METRICS = {"console", "issuer", "ledger", "deliverer", "worker", "beat"}
CRD_KINDS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitor.json",
    ("gateway.networking.k8s.io/v1", "HTTPRoute"): "httproute.json",
    ("postgresql.cnpg.io/v1", "Cluster"): "cnpg-cluster.json",
}
# Set by the chart itself (never through `config`), and `make run`-only settings.
CHART_MANAGED = {"FRONTDOOR_ENV", "FRONTDOOR_KEK", "DATABASE_URL", "REDIS_URL", "FRONTDOOR_CONSOLE_BASE_URL",
                 "FRONTDOOR_ISSUER_BASE_URL", "FRONTDOOR_LEDGER_BASE_URL", "OTEL_EXPORTER_OTLP_ENDPOINT", "FRONTDOOR_METRICS_PORT",
                 "STRIPE_API_KEY", "STRIPE_WEBHOOK_SECRET"}
DEV_ONLY = {"FRONTDOOR_DATA_DIR", "FRONTDOOR_CONSOLE_PORT", "FRONTDOOR_ISSUER_PORT", "FRONTDOOR_LEDGER_PORT",
            "FRONTDOOR_EXAMPLE_PORT"}

Doc = dict[str, Any]


def _merge(dst: dict[str, Any], src: dict[str, Any]) -> dict[str, Any]:
    for key, value in src.items():
        if isinstance(value, dict) and isinstance(dst.get(key), dict):
            _merge(dst[key], value)
        else:
            dst[key] = value
    return dst


def production_values() -> dict[str, Any]:
    return yaml.safe_load(PRODUCTION_VALUES.read_text())


def variants() -> dict[str, dict[str, Any]]:
    """The values each test renders: defaults, the production-like file, and everything optional on."""
    gateway = _merge(production_values(), {
        "ingress": {"enabled": False},
        "httpRoute": {"enabled": True, "parentRefs": [{"name": "public", "namespace": "gateway-system",
                                                       "sectionName": "https"}]},
        "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus"}}},
        "reencryptSecrets": {"enabled": True, "dryRun": True},
    })
    return {"default": {}, "production": production_values(), "gateway": gateway}


def render(chart: Path, values: dict[str, Any]) -> list[Doc]:
    out = helm.Chart.load(str(chart)).render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    docs = []
    for path, text in sorted(out.items()):
        if path.endswith((".yaml", ".yml")):
            docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[Doc]]:
    return {name: render(CHART, values) for name, values in variants().items()}


VARIANTS = sorted(variants())


# --- views on a render -------------------------------------------------------------------------


def of_kind(docs: list[Doc], kind: str) -> dict[str, Doc]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def component(doc: Doc) -> str:
    return str(doc["metadata"]["labels"]["app.kubernetes.io/component"])


def deployments(docs: list[Doc]) -> dict[str, Doc]:
    return {component(d): d for d in of_kind(docs, "Deployment").values()}


def pod_specs(docs: list[Doc]) -> Iterator[tuple[str, Doc]]:
    for d in docs:
        if d["kind"] in {"Deployment", "Job"}:
            yield f"{d['kind']}/{d['metadata']['name']}", d["spec"]["template"]


def env_of(container: Doc) -> dict[str, Doc]:
    return {e["name"]: e for e in container.get("env", [])}


def hook(doc: Doc) -> set[str]:
    return set(filter(None, (doc["metadata"].get("annotations") or {}).get("helm.sh/hook", "").split(",")))


# --- checks: each returns a list of problems --------------------------------------------------


def lint_problems(chart: Path, values: dict[str, Any]) -> list[str]:
    report = helm.lint(str(chart), values, strict=True, kube_version="v" + OLDEST_K8S)
    # severity 1 is INFO ("icon is recommended"); 2 WARNING and 3 ERROR fail under --strict.
    return [f"{m['path']}: {m['error']}" for m in report["messages"] if m["severity"] >= 2] + list(report["errors"])


def schema_problems(docs: list[Doc], kube_version: str) -> list[str]:
    problems = []
    for d in docs:
        key = (d.get("apiVersion"), d.get("kind"))
        where = f"{d.get('kind')}/{d.get('metadata', {}).get('name')}"
        if key in CRD_KINDS:
            problems += crd_problems(d)
            continue
        try:
            kv.validate(d, kube_version, strict=True)
        except kv.SchemaNotFoundError:
            problems.append(f"{where}: no schema for {key} in Kubernetes {kube_version} and not a known CRD kind")
        except kv.ValidationError as e:
            problems.append(f"{where}: {'.'.join(map(str, e.path))}: {e.message}")
    return problems


def crd_problems(doc: Doc) -> list[str]:
    schema = json.loads((CRD_SCHEMAS / CRD_KINDS[(doc["apiVersion"], doc["kind"])]).read_text())
    validator = jsonschema.Draft7Validator(schema)
    return [f"{doc['kind']}/{doc['metadata'].get('name')}: {'.'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(doc)]


def security_problems(docs: list[Doc]) -> list[str]:
    problems = []
    for where, tpl in pod_specs(docs):
        spec = tpl["spec"]
        psc = spec.get("securityContext") or {}
        if spec.get("automountServiceAccountToken") is not False:
            problems.append(f"{where}: automountServiceAccountToken is not false")
        if psc.get("runAsNonRoot") is not True or psc.get("runAsUser", 0) == 0:
            problems.append(f"{where}: pod may run as root")
        if (psc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
            problems.append(f"{where}: pod seccompProfile is not RuntimeDefault")
        tmp_volumes = {v["name"] for v in spec.get("volumes", []) if "emptyDir" in v}
        for c in spec["containers"] + spec.get("initContainers", []):
            csc = c.get("securityContext") or {}
            name = f"{where}/{c['name']}"
            if csc.get("readOnlyRootFilesystem") is not True:
                problems.append(f"{name}: root filesystem is writable")
            if csc.get("allowPrivilegeEscalation") is not False:
                problems.append(f"{name}: allowPrivilegeEscalation is not false")
            if (csc.get("capabilities") or {}).get("drop") != ["ALL"] or (csc.get("capabilities") or {}).get("add"):
                problems.append(f"{name}: capabilities are not exactly drop [ALL]")
            if csc.get("privileged"):
                problems.append(f"{name}: privileged")
            if not any(m["mountPath"] == "/tmp" and m["name"] in tmp_volumes for m in c.get("volumeMounts", [])):
                problems.append(f"{name}: no emptyDir at /tmp under the read-only root")
            if not (c.get("resources") or {}).get("requests") or not (c.get("resources") or {}).get("limits"):
                problems.append(f"{name}: no resource requests and limits")
    for sa in of_kind(docs, "ServiceAccount").values():
        if sa.get("automountServiceAccountToken") is not False:
            problems.append(f"ServiceAccount/{sa['metadata']['name']}: token automount is not off")
    accounts = set(of_kind(docs, "ServiceAccount"))
    for where, tpl in pod_specs(docs):
        if tpl["spec"].get("serviceAccountName") not in accounts:
            problems.append(f"{where}: runs as ServiceAccount {tpl['spec'].get('serviceAccountName')!r} the chart lacks")
    if of_kind(docs, "Secret"):
        problems.append(f"the chart renders Secrets {sorted(of_kind(docs, 'Secret'))}: secrets come from existing ones")
    return problems


def probe_problems(docs: list[Doc]) -> list[str]:
    problems = []
    for name, d in deployments(docs).items():
        c = d["spec"]["template"]["spec"]["containers"][0]
        if name in HTTP_PORTS:
            ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
            if ports.get("http") != HTTP_PORTS[name]:
                problems.append(f"{name}: container port http is {ports.get('http')}, the image serves {HTTP_PORTS[name]}")
            for probe, path in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
                got = (c.get(probe) or {}).get("httpGet") or {}
                if got.get("path") != path or got.get("port") != "http":
                    problems.append(f"{name}: {probe} is not GET {path} on port http")
        else:
            for probe in ("startupProbe", "livenessProbe"):
                if not (c.get(probe) or {}).get("exec"):
                    problems.append(f"{name}: no {probe}")
    return problems


def availability_problems(docs: list[Doc], values: dict[str, Any]) -> list[str]:
    """Beat is a singleton; every other component gets the PDB (and HPA) its values enable."""
    merged = _merge(yaml.safe_load((CHART / "values.yaml").read_text()), copy.deepcopy(values))
    problems = []
    deps = deployments(docs)
    pdbs = {tuple(sorted(p["spec"]["selector"]["matchLabels"].items())): p for p in of_kind(docs, "PodDisruptionBudget").values()}
    hpas = {h["spec"]["scaleTargetRef"]["name"]: h for h in of_kind(docs, "HorizontalPodAutoscaler").values()}
    beat = deps.get("beat")
    if beat is None:
        problems.append("no beat Deployment")
    else:
        if beat["spec"].get("replicas") != 1 or beat["spec"].get("strategy", {}).get("type") != "Recreate":
            problems.append("beat is not one replica with strategy Recreate")
        if beat["metadata"]["name"] in hpas:
            problems.append("beat has an HPA")
    for name, d in deps.items():
        selector = tuple(sorted(d["spec"]["selector"]["matchLabels"].items()))
        want_pdb = name != "beat" and merged[name]["pdb"]["enabled"]
        if want_pdb != (selector in pdbs):
            problems.append(f"{name}: PDB {'missing' if want_pdb else 'unexpected'}")
        want_hpa = name != "beat" and merged[name].get("autoscaling", {}).get("enabled", False)
        if want_hpa != (d["metadata"]["name"] in hpas):
            problems.append(f"{name}: HPA {'missing' if want_hpa else 'unexpected'}")
        if want_hpa and "replicas" in d["spec"]:
            problems.append(f"{name}: sets replicas although an HPA owns them")
        if name != "beat" and not want_hpa and d["spec"].get("replicas") != merged[name]["replicas"]:
            problems.append(f"{name}: replicas {d['spec'].get('replicas')} != values {merged[name]['replicas']}")
        if name in HTTP_PORTS and merged[name]["pdb"]["enabled"] is False:
            problems.append(f"{name}: an HTTP service without a PDB")
        spread = d["spec"]["template"]["spec"].get("topologySpreadConstraints") or []
        if merged["topologySpread"]["enabled"] and not any(t["topologyKey"] == merged["topologySpread"]["zoneKey"] for t in spread):
            problems.append(f"{name}: not spread across zones")
    return problems


def _selected(policy: Doc, labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in policy["spec"]["podSelector"].get("matchLabels", {}).items())


def _public_internet(rule: Doc) -> bool:
    return any((p.get("ipBlock") or {}).get("cidr") in {"0.0.0.0/0", "::/0"} for p in rule.get("to", []))


def network_problems(docs: list[Doc], values: dict[str, Any]) -> list[str]:
    merged = _merge(yaml.safe_load((CHART / "values.yaml").read_text()), copy.deepcopy(values))
    if not merged["networkPolicy"]["enabled"]:
        return []
    problems = []
    policies = list(of_kind(docs, "NetworkPolicy").values())
    for where, tpl in pod_specs(docs):
        labels = tpl["metadata"]["labels"]
        name = labels["app.kubernetes.io/component"]
        mine = [p for p in policies if _selected(p, labels)]
        if not mine:
            problems.append(f"{where}: no NetworkPolicy selects it")
            continue
        types = {t for p in mine for t in p["spec"].get("policyTypes", [])}
        if types != {"Ingress", "Egress"}:
            problems.append(f"{where}: policyTypes {sorted(types)}")
        ingress = [r for p in mine for r in p["spec"].get("ingress", [])]
        # Each rule is one (peers, port) pair: the ingress controller to http, the scraper to metrics.
        allowed = {}
        if name in HTTP_PORTS:
            allowed["http"] = merged["networkPolicy"]["ingressFrom"]
        if name in METRICS:
            allowed["metrics"] = merged["metrics"]["scrapeFrom"]
        for rule in ingress:
            ports = [p.get("port") for p in rule.get("ports", [])]
            if len(ports) != 1 or ports[0] not in allowed:
                problems.append(f"{where}: ingress on ports {ports}, not one of {sorted(allowed)}")
            elif rule.get("from") != allowed[ports[0]]:
                problems.append(f"{where}: ingress to {ports[0]} from {rule.get('from')}")
        if {p.get("port") for r in ingress for p in r.get("ports", [])} != set(allowed):
            problems.append(f"{where}: ingress rules {ingress} do not open exactly {sorted(allowed)}")
        egress = [r for p in mine for r in p["spec"].get("egress", [])]
        if not any({"port": 53, "protocol": "UDP"} in r.get("ports", []) for r in egress):
            problems.append(f"{where}: no DNS egress")
        pg_ports = set(merged["networkPolicy"]["postgres"]["ports"])
        if not any(pg_ports <= {p.get("port") for p in r.get("ports", [])} for r in egress):
            problems.append(f"{where}: no PostgreSQL egress")
        internet = [r for r in egress if _public_internet(r)]
        if (name in INTERNET) != bool(internet):
            problems.append(f"{where}: internet egress {'missing' if name in INTERNET else 'not allowed'}")
        for rule in internet:
            for block in rule["to"]:
                cidr = block["ipBlock"]["cidr"]
                if cidr == "0.0.0.0/0" and not {"10.0.0.0/8", "169.254.0.0/16"} <= set(block["ipBlock"].get("except", [])):
                    problems.append(f"{where}: 'internet' egress includes private or metadata addresses")
    return problems


def route_problems(docs: list[Doc], values: dict[str, Any]) -> list[str]:
    """Each public host routes to its service; the issuer's host covers /{slug}/... and the RFC 8414 location."""
    merged = _merge(yaml.safe_load((CHART / "values.yaml").read_text()), copy.deepcopy(values))
    hosts = {name: re.sub(r"^https://", "", merged["publicUrls"][name]).split(":")[0] for name in HTTP_PORTS}
    services = of_kind(docs, "Service")
    routes: dict[str, set[tuple[str, str]]] = {}
    for ing in of_kind(docs, "Ingress").values():
        for rule in ing["spec"]["rules"]:
            for p in rule["http"]["paths"]:
                svc = p["backend"]["service"]
                if svc["name"] not in services or svc["port"].get("name") not in {
                        sp["name"] for sp in services[svc["name"]]["spec"]["ports"]}:
                    return [f"Ingress path {p['path']} goes to a missing Service or port {svc}"]
                routes.setdefault(rule["host"], set()).add((p["path"], svc["name"]))
    for route in of_kind(docs, "HTTPRoute").values():
        for rule in route["spec"]["rules"]:
            for ref in rule["backendRefs"]:
                if ref["name"] not in services or ref["port"] not in {sp["port"] for sp in services[ref["name"]]["spec"]["ports"]}:
                    return [f"HTTPRoute backend {ref} is not a Service port"]
                for host in route["spec"]["hostnames"]:
                    routes.setdefault(host, set()).update((m["path"]["value"], ref["name"]) for m in rule["matches"])
    want_routes = merged["ingress"]["enabled"] or merged["httpRoute"]["enabled"]
    problems = []
    for name, host in hosts.items():
        target = PREFIX + name
        got = routes.get(host, set())
        if want_routes and ("/", target) not in got:
            problems.append(f"{host}/ does not route to {target}: {got}")
        if any(svc != target for _, svc in got):
            problems.append(f"{host} routes to another service: {got}")
        if want_routes and name == "issuer" and ("/.well-known/oauth-authorization-server", target) not in got:
            problems.append("the issuer host does not route /.well-known/oauth-authorization-server/{slug}")
    return problems


def migration_problems(docs: list[Doc]) -> list[str]:
    jobs = [j for j in of_kind(docs, "Job").values() if component(j) == "migrate"]
    if len(jobs) != 1:
        return [f"{len(jobs)} migration Jobs"]
    job = jobs[0]
    problems = []
    ann = job["metadata"].get("annotations") or {}
    if hook(job) != {"pre-install", "pre-upgrade"}:
        problems.append(f"migration Job hooks {hook(job)}")
    if "before-hook-creation" not in ann.get("helm.sh/hook-delete-policy", ""):
        problems.append("migration Job has no before-hook-creation delete policy")
    sa = job["spec"]["template"]["spec"]["serviceAccountName"]
    weight = int(ann.get("helm.sh/hook-weight", "0"))
    for doc in docs:
        if doc["metadata"]["name"] == sa and doc["kind"] in {"ServiceAccount", "NetworkPolicy"} and (
                hook(doc) != hook(job) or int(doc["metadata"]["annotations"].get("helm.sh/hook-weight", "0")) >= weight):
            problems.append(f"{doc['kind']}/{sa} is not a hook created before the Job")
    env = env_of(job["spec"]["template"]["spec"]["containers"][0])
    if "DATABASE_URL" not in env or "FRONTDOOR_KEK" in env:
        problems.append(f"migration Job env {sorted(env)}: it needs DATABASE_URL and nothing secret besides")
    if any(hook(d) for d in docs if d["kind"] == "Deployment"):
        problems.append("a Deployment is a hook")
    return problems


def env_problems(docs: list[Doc]) -> list[str]:
    """Every Frontdoor process: production, the KEK from a Secret, settings that load."""
    problems = []
    for where, tpl in pod_specs(docs):
        if tpl["metadata"]["labels"]["app.kubernetes.io/component"] == "migrate":
            continue
        for c in tpl["spec"]["containers"]:
            env = env_of(c)
            if env.get("FRONTDOOR_ENV", {}).get("value") != "production":
                problems.append(f"{where}: FRONTDOOR_ENV is not production")
            for var in ("FRONTDOOR_KEK", "DATABASE_URL", "REDIS_URL"):
                if var not in env:
                    problems.append(f"{where}: no {var}")
            if "secretKeyRef" not in env.get("FRONTDOOR_KEK", {}).get("valueFrom", {}):
                problems.append(f"{where}: FRONTDOOR_KEK is not from a Secret")
            plain = {k: e["value"] for k, e in env.items() if "value" in e}
            plain.update({k: "postgresql://x@db/x" if k == "DATABASE_URL" else "redis://r:6379/0" if k == "REDIS_URL"
                          else "A" * 43 for k, e in env.items() if "valueFrom" in e and k in CHART_MANAGED})
            try:
                load_settings(plain)
            except ValueError as exc:
                problems.append(f"{where}: the rendered environment is not valid Settings: {exc}")
    return problems


# --- the real chart ---------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_lint_strict(variant: str) -> None:
    assert lint_problems(CHART, variants()[variant]) == []


@pytest.mark.parametrize("kube_version", [OLDEST_K8S, NEWEST_K8S])
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_manifest_validates_strictly(rendered: dict[str, list[Doc]], variant: str, kube_version: str) -> None:
    assert rendered[variant]
    assert schema_problems(rendered[variant], kube_version) == []


def test_oldest_version_is_the_charts_floor() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["kubeVersion"] == f">={OLDEST_K8S}-0"


def test_crd_kinds_are_rendered_and_validated(rendered: dict[str, list[Doc]]) -> None:
    kinds = {(d["apiVersion"], d["kind"]) for d in rendered["gateway"]}
    assert {k for k in CRD_KINDS if k[1] != "Cluster"} <= kinds
    assert not {k for k in CRD_KINDS} & {(d["apiVersion"], d["kind"]) for d in rendered["default"]}
    cluster = yaml.safe_load(CNPG_CLUSTER.read_text())
    assert crd_problems(cluster) == []
    # The production values read CloudNativePG's app Secret of that Cluster.
    assert production_values()["database"] == {"existingSecret": f"{cluster['metadata']['name']}-app", "secretKey": "uri"}


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


@pytest.mark.parametrize("variant", VARIANTS)
def test_metrics_port_is_internal(rendered: dict[str, list[Doc]], variant: str) -> None:
    """Each metrics component: FRONTDOOR_METRICS_PORT = the container port `metrics`, on a headless Service only."""
    docs, port = rendered[variant], 9100
    services = of_kind(docs, "Service").values()
    for name, dep in deployments(docs).items():
        c = dep["spec"]["template"]["spec"]["containers"][0]
        ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
        env = env_of(c)
        if name not in METRICS:
            assert "metrics" not in ports and "FRONTDOOR_METRICS_PORT" not in env, name
            continue
        assert ports["metrics"] == port and env["FRONTDOOR_METRICS_PORT"]["value"] == str(port), name
        pod = dep["spec"]["template"]["metadata"]["labels"]
        carrying = [s for s in services if _matches(s["spec"]["selector"], pod)
                    and any(p.get("targetPort") == "metrics" for p in s["spec"]["ports"])]
        assert [s["metadata"]["name"] for s in carrying] == [f"{PREFIX}{name}-metrics"], name
        assert carrying[0]["spec"]["clusterIP"] == "None"
        assert [p["name"] for p in carrying[0]["spec"]["ports"]] == ["metrics"]
    public = [p for s in services if not s["metadata"]["name"].endswith("-metrics") for p in s["spec"]["ports"]]
    assert {p["targetPort"] for p in public} == {"http"}


def test_service_monitor_per_metrics_component(rendered: dict[str, list[Doc]]) -> None:
    docs = rendered["gateway"]
    monitors = of_kind(docs, "ServiceMonitor")
    assert {component(m) for m in monitors.values()} == METRICS and len(monitors) == len(METRICS)
    services = of_kind(docs, "Service").values()
    pods = {n: d["spec"]["template"]["metadata"]["labels"] for n, d in deployments(docs).items()}
    for m in monitors.values():
        assert m["metadata"]["labels"]["release"] == "kube-prometheus"
        chosen = [s for s in services if _matches(m["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])]
        assert [s["metadata"]["name"] for s in chosen] == [f"{PREFIX}{component(m)}-metrics"]
        assert [e["port"] for e in m["spec"]["endpoints"]] == ["metrics"]
        assert {e["path"] for e in m["spec"]["endpoints"]} == {"/metrics"}
        assert m["spec"]["endpoints"][0]["port"] in {p["name"] for p in chosen[0]["spec"]["ports"]}
        # ...and that Service's selector picks that component's pods and no other's.
        assert [n for n, labels in pods.items() if _matches(chosen[0]["spec"]["selector"], labels)] == [component(m)]
    for name in ("default", "production"):
        assert of_kind(rendered[name], "ServiceMonitor") == {}


@pytest.mark.parametrize("variant", VARIANTS)
def test_security_properties(rendered: dict[str, list[Doc]], variant: str) -> None:
    assert security_problems(rendered[variant]) == []


@pytest.mark.parametrize("variant", VARIANTS)
def test_probes(rendered: dict[str, list[Doc]], variant: str) -> None:
    assert probe_problems(rendered[variant]) == []


@pytest.mark.parametrize("variant", VARIANTS)
def test_beat_singleton_pdbs_hpas_and_spread(rendered: dict[str, list[Doc]], variant: str) -> None:
    assert availability_problems(rendered[variant], variants()[variant]) == []


@pytest.mark.parametrize("variant", VARIANTS)
def test_network_policies(rendered: dict[str, list[Doc]], variant: str) -> None:
    assert network_problems(rendered[variant], variants()[variant]) == []


@pytest.mark.parametrize("variant", VARIANTS)
def test_routes(rendered: dict[str, list[Doc]], variant: str) -> None:
    assert route_problems(rendered[variant], variants()[variant]) == []


@pytest.mark.parametrize("variant", VARIANTS)
def test_migration_hook(rendered: dict[str, list[Doc]], variant: str) -> None:
    assert migration_problems(rendered[variant]) == []


@pytest.mark.parametrize("variant", VARIANTS)
def test_environment(rendered: dict[str, list[Doc]], variant: str) -> None:
    assert env_problems(rendered[variant]) == []


def test_production_values_read_every_url_from_a_secret(rendered: dict[str, list[Doc]]) -> None:
    for where, tpl in pod_specs(rendered["production"]):
        env = env_of(tpl["spec"]["containers"][0])
        for var in ("DATABASE_URL", "REDIS_URL") if "migrate" not in where else ("DATABASE_URL",):
            assert "secretKeyRef" in env[var].get("valueFrom", {}), (where, var)


def test_every_operator_setting_is_reachable_through_values() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    tunable = set(schema["properties"]["config"]["propertyNames"]["enum"])
    assert tunable == set(ENV_NAMES.values()) - CHART_MANAGED - DEV_ONLY, (
        "a setting was added or removed: list it in values.schema.json config.propertyNames "
        "(or set it from the chart and add it to CHART_MANAGED)")
    sentinel = {name: f"sentinel-{i}" for i, name in enumerate(sorted(tunable))}
    # msgspec would refuse sentinels for typed settings, so only check that they arrive.
    docs = render(CHART, {"config": sentinel, "telemetry": {"otlpEndpoint": "http://collector:4318"}})
    for where, tpl in pod_specs(docs):
        if "migrate" in where:
            continue
        env = env_of(tpl["spec"]["containers"][0])
        missing = [n for n, v in sentinel.items() if env.get(n, {}).get("value") != v]
        assert missing == [], (where, missing)
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"]["value"] == "http://collector:4318"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"config": {"FRONTDOOR_KEK": "x"}}, "FRONTDOOR_KEK"),           # secrets never in values
        ({"config": {"FRONTDOOR_ISUER_BASE_URL": "x"}}, "FRONTDOOR_ISUER"),
        ({"config": {"FRONTDOOR_ENV": "dev"}}, "FRONTDOOR_ENV"),
        ({"publicUrls": {"issuer": "http://id.example"}}, "publicUrls/issuer"),
        ({"publicUrls": {"issuer": "https://id.example/"}}, "publicUrls/issuer"),
        ({"beat": {"replicas": 2}}, "replicas"),
        ({"podSecurityContext": {"runAsUser": 0}}, "runAsUser"),
        ({"secrets": {"existingSecret": ""}}, "existingSecret"),
        ({"worker": {"concurrency": 0}}, "concurrency"),
        ({"nosuchvalue": 1}, "nosuchvalue"),
    ],
)
def test_schema_refuses(values: dict[str, Any], message: str) -> None:
    with pytest.raises(helm.HelmValuesError, match=message):
        render(CHART, values)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"publicUrls": {"ledger": "https://console.frontdoor.example"}}, "share the host"),
        ({"database": {"url": "postgresql://db/x", "existingSecret": "pg"}}, "not both"),
        ({"httpRoute": {"enabled": True}}, "parentRefs"),
    ],
)
def test_templates_refuse(values: dict[str, Any], message: str) -> None:
    with pytest.raises(helm.HelmRenderError, match=message):
        render(CHART, values)


# --- topology: the chart, compose and the processes that exist agree ----------------------------


def existing_processes() -> set[str]:
    """What `make run` starts: an ASGI app per HTTP service, and the dispatcher's processes."""
    from frontdoor_core.settings import load_settings
    from frontdoor_devstack.run import process_table

    http = {p.parent.name.removeprefix("frontdoor_") for p in ROOT.glob("services/*/src/frontdoor_*/asgi.py")}
    spawned = {p.name for p in process_table(load_settings({}))}  # make run's process table
    return http | spawned


def test_chart_and_compose_run_the_processes_that_exist(rendered: dict[str, list[Doc]]) -> None:
    processes = existing_processes()
    assert processes >= {"console", "issuer", "ledger", "deliverer", "worker", "beat"}
    assert set(HTTP_PORTS) == {p for p in processes if (ROOT / "services" / p / "Dockerfile").is_file()
                               and (ROOT / "services" / p / "src" / f"frontdoor_{p}" / "asgi.py").is_file()}
    compose = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    frontdoor = {n for n, s in compose.items() if "build" in s and n != "migrate"}
    assert frontdoor == processes
    for variant, docs in rendered.items():
        assert set(deployments(docs)) == processes, variant
    # Same commands in both: the deliverer and beat override the dispatcher image's CMD, the worker adds concurrency.
    deps = deployments(rendered["default"])
    for name in ("deliverer", "beat"):
        assert deps[name]["spec"]["template"]["spec"]["containers"][0]["command"] == compose[name]["command"]
    assert deps["worker"]["spec"]["template"]["spec"]["containers"][0]["command"][:4] == [
        "celery", "-A", "frontdoor_dispatcher.celery_app", "worker"]
    for name, port in HTTP_PORTS.items():
        assert compose[name]["ports"] == [f"127.0.0.1:{port}:{port}"]
        expose = re.search(r"^EXPOSE (\d+)$", (ROOT / "services" / name / "Dockerfile").read_text(), re.MULTILINE)
        assert expose and int(expose.group(1)) == port


# --- the checks fail on a broken chart ---------------------------------------------------------


@pytest.fixture
def broken_chart(tmp_path: Path) -> Path:
    dest = tmp_path / "frontdoor"
    shutil.copytree(CHART, dest)
    return dest


def _break(chart: Path, template: str, old: str, new: str) -> None:
    path = chart / "templates" / template
    text = path.read_text()
    assert old in text, f"{old!r} is no longer in {template}: update this test"
    path.write_text(text.replace(old, new, 1))


def test_checks_catch_a_misspelt_field(broken_chart: Path) -> None:
    _break(broken_chart, "deployments.yaml", "imagePullPolicy:", "imagePullPolcy:")
    problems = schema_problems(render(broken_chart, {}), OLDEST_K8S)
    assert any("imagePullPolcy" in p for p in problems), problems


def test_checks_catch_a_writable_root_and_a_mounted_token(broken_chart: Path) -> None:
    _break(broken_chart, "_helpers.tpl", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false")
    _break(broken_chart, "deployments.yaml", "automountServiceAccountToken: false", "automountServiceAccountToken: true")
    problems = security_problems(render(broken_chart, {}))
    assert any("root filesystem is writable" in p for p in problems), problems
    assert any("automountServiceAccountToken" in p for p in problems), problems


def test_checks_catch_a_missing_readiness_probe_and_a_second_beat(broken_chart: Path) -> None:
    _break(broken_chart, "deployments.yaml", "httpGet: {path: /readyz, port: http}", "httpGet: {path: /healthz, port: http}")
    _break(broken_chart, "deployments.yaml", "  replicas: 1\n  strategy:\n    type: Recreate",
           "  replicas: 2\n  strategy:\n    type: Recreate")
    docs = render(broken_chart, {})
    assert any("readinessProbe is not GET /readyz" in p for p in probe_problems(docs))
    assert any("beat is not one replica" in p for p in availability_problems(docs, {}))


def test_checks_catch_open_network_policies_and_a_lost_pdb(broken_chart: Path) -> None:
    _break(broken_chart, "networkpolicies.yaml", "{{- if has $component $internet }}", "{{- if true }}")
    _break(broken_chart, "pdb.yaml", '"console" "issuer" "ledger"', '"issuer" "ledger"')
    docs = render(broken_chart, {})
    assert any("beat" in p and "internet egress not allowed" in p for p in network_problems(docs, {}))
    assert any("console: PDB missing" in p for p in availability_problems(docs, {}))


def test_checks_catch_a_lint_error_and_a_bad_crd(broken_chart: Path) -> None:
    _break(broken_chart, "ingress.yaml", "{{- range $component", "{{- range $component := ")
    assert lint_problems(broken_chart, {})
    route = next(d for d in render(CHART, variants()["gateway"]) if d["kind"] == "HTTPRoute")
    route["spec"]["rules"][0]["matches"][0]["path"]["type"] = "Prefix"   # Ingress' word, not Gateway API's
    assert any("Prefix" in p for p in crd_problems(route))
