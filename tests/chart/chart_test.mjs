// Chart tests: helm lint and template with the default values and every ci/*-values.yaml,
// every rendered object validated against the Kubernetes schemas (kubernetes-models), and
// the promises the chart makes checked on the rendered objects. HELM names the helm binary.
//
//   HELM=/path/to/helm node --test tests/chart/chart_test.mjs

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readdirSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

const here = path.dirname(fileURLToPath(import.meta.url));
const chart = path.resolve(here, "../../charts/dhpt");
const helm = process.env.HELM;
assert.ok(helm, "set HELM to the helm binary (tests/chart/run.sh does)");
const ciValues = readdirSync(path.join(chart, "ci")).filter((f) => f.endsWith("-values.yaml"));
const withMonitoring = ["--api-versions", "monitoring.coreos.com/v1/ServiceMonitor"];

function helmRun(args) {
  return execFileSync(helm, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

function render(args = []) {
  return parseAllDocuments(helmRun(["template", "t", chart, ...args]))
    .map((doc) => doc.toJS())
    .filter((object) => object);
}

function renderFails(args) {
  try {
    helmRun(["template", "t", chart, ...args]);
  } catch (error) {
    return String(error.stderr);
  }
  assert.fail(`helm template ${args.join(" ")} was accepted`);
}

async function validate(object) {
  const [group, version] = object.apiVersion.includes("/") ? object.apiVersion.split("/") : [null, object.apiVersion];
  const module = group === "monitoring.coreos.com"
    ? `@kubernetes-models/prometheus-operator/${group}/${version}/${object.kind}`
    : `kubernetes-models/${group ? `${group}/` : ""}${version}/${object.kind}`;
  const Model = (await import(module))[object.kind];
  new Model(object).validate();
}

const find = (objects, kind, nameSuffix) =>
  objects.find((o) => o.kind === kind && o.metadata.name.endsWith(nameSuffix));
const podSpec = (deployment) => deployment.spec.template.spec;
const container = (deployment) => podSpec(deployment).containers[0];

test("helm lint --strict passes with the defaults and every ci values file", () => {
  helmRun(["lint", "--strict", chart]);
  for (const file of ciValues) helmRun(["lint", "--strict", chart, "-f", path.join(chart, "ci", file)]);
});

test("every rendered object is valid against the Kubernetes schemas", async () => {
  for (const args of [[], withMonitoring, ...ciValues.map((f) => ["-f", path.join(chart, "ci", f), ...withMonitoring])]) {
    const objects = render(args);
    assert.ok(objects.length >= 4, `rendered ${objects.length} objects for ${args}`);
    for (const object of objects) {
      await assert.doesNotReject(async () => validate(object), `${object.kind} ${object.metadata.name} (${args.join(" ")})`);
    }
  }
});

test("GPU workers carry exactly the required gpu In [orin, nano] affinity", () => {
  const gpu = find(render(), "Deployment", "-gpu-worker");
  const affinity = podSpec(gpu).affinity.nodeAffinity;
  assert.deepEqual(affinity.requiredDuringSchedulingIgnoredDuringExecution, {
    nodeSelectorTerms: [{ matchExpressions: [{ key: "gpu", operator: "In", values: ["orin", "nano"] }] }],
  });
  assert.equal(affinity.preferredDuringSchedulingIgnoredDuringExecution, undefined);
  assert.ok(container(gpu).args.includes("--require-gpu"));
  assert.ok(container(gpu).args.includes("--device=cuda"));
});

test("CPU workers never require a GPU label and by default prefer other nodes", () => {
  for (const args of [[], ...ciValues.map((f) => ["-f", path.join(chart, "ci", f)])]) {
    const cpu = find(render(args), "Deployment", "-cpu-worker");
    const affinity = podSpec(cpu).affinity?.nodeAffinity ?? {};
    for (const term of affinity.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms ?? []) {
      for (const expression of term.matchExpressions) assert.notEqual(expression.operator, "In", JSON.stringify(expression));
    }
    assert.ok(!container(cpu).args.some((a) => a.startsWith("--require-gpu")));
  }
  const preferred = podSpec(find(render(), "Deployment", "-cpu-worker")).affinity.nodeAffinity
    .preferredDuringSchedulingIgnoredDuringExecution;
  assert.deepEqual(preferred, [{ weight: 100, preference: { matchExpressions: [{ key: "gpu", operator: "NotIn", values: ["orin", "nano"] }] } }]);
  const none = render(["--set", "cpuWorker.gpuNodes=none"]);
  assert.equal(podSpec(find(none, "Deployment", "-cpu-worker")).affinity, undefined);
});

test("overrides of the label key, values, replicas and GPU resources take effect", () => {
  const objects = render(["-f", path.join(chart, "ci", "gpu-cluster-values.yaml")]);
  const gpu = find(objects, "Deployment", "-gpu-worker");
  const cpu = find(objects, "Deployment", "-cpu-worker");
  // The user's own required term is kept, and the GPU requirement is added to it.
  assert.deepEqual(podSpec(gpu).affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms, [
    { matchExpressions: [
      { key: "kubernetes.io/arch", operator: "In", values: ["arm64", "amd64"] },
      { key: "accelerator", operator: "In", values: ["jetson-orin", "rtx"] },
    ] },
  ]);
  assert.deepEqual(podSpec(cpu).affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms, [
    { matchExpressions: [{ key: "accelerator", operator: "NotIn", values: ["jetson-orin", "rtx"] }] },
  ]);
  assert.equal(gpu.spec.replicas, 3);
  assert.equal(cpu.spec.replicas, 5);
  assert.ok(container(cpu).args.includes("--slots=2"));
  assert.equal(podSpec(gpu).runtimeClassName, "nvidia");
  assert.equal(container(gpu).resources.limits["nvidia.com/gpu"], 1);
  assert.ok(container(gpu).args.includes("--run-cpu-models"));
  assert.equal(find(objects, "NetworkPolicy", "-scheduler").spec.ingress[1].from[0].namespaceSelector.matchLabels["kubernetes.io/metadata.name"], "monitoring");
});

test("imported image archives: every container names the archive's image and never pulls", () => {
  // scripts/build-images.sh --archive saves ghcr.io/dhpt/COMPONENT:TAG (tests/scripts/build_images_test.sh).
  const objects = render(["-f", path.join(chart, "ci", "k3s-archive-values.yaml")]);
  for (const component of ["scheduler", "cpu-worker", "gpu-worker"]) {
    const c = container(find(objects, "Deployment", `-${component}`));
    assert.equal(c.image, `ghcr.io/dhpt/${component}:0.1.0`, component);
    assert.equal(c.imagePullPolicy, "Never", component);
  }
});

test("worker labels reach --labels, sorted, so that studies can select boards", () => {
  const objects = render(["--set", "cpuWorker.labels.board=pi4", "--set", "cpuWorker.labels.site=lab",
                          "--set", "gpuWorker.labels.board=orin-nano"]);
  assert.ok(container(find(objects, "Deployment", "-cpu-worker")).args.includes("--labels=board=pi4,site=lab"));
  assert.ok(container(find(objects, "Deployment", "-gpu-worker")).args.includes("--labels=board=orin-nano"));
  for (const worker of ["-cpu-worker", "-gpu-worker"]) {
    assert.ok(!container(find(render(), "Deployment", worker)).args.some((arg) => arg.startsWith("--labels")), worker);
  }
});

test("probes point at ports the containers declare", () => {
  for (const args of [[], ...ciValues.map((f) => ["-f", path.join(chart, "ci", f)])]) {
    for (const deployment of render(args).filter((o) => o.kind === "Deployment")) {
      const c = container(deployment);
      const ports = c.ports.flatMap((p) => [p.containerPort, p.name]);
      const probes = ["startupProbe", "livenessProbe", "readinessProbe"].filter((p) => c[p]);
      assert.ok(probes.length >= 2, `${deployment.metadata.name} has probes`);
      for (const name of probes) {
        const port = (c[name].grpc ?? c[name].httpGet ?? c[name].tcpSocket).port;
        assert.ok(ports.includes(port), `${deployment.metadata.name} ${name} port ${port} is not one of ${ports}`);
      }
    }
  }
  const scheduler = container(find(render(), "Deployment", "-scheduler"));
  assert.equal(scheduler.livenessProbe.grpc.port, scheduler.ports.find((p) => p.name === "grpc").containerPort);
  assert.equal(scheduler.readinessProbe.grpc.service, "dhpt.v1.StudyService");
  assert.ok(scheduler.args.includes(`--metrics-port=${scheduler.ports.find((p) => p.name === "metrics").containerPort}`));
});

test("the scheduler's memory cap is its container's limit, in bytes", () => {
  const args = (values) => container(find(render(values), "Deployment", "-scheduler")).args;
  assert.ok(args([]).includes("--max-memory-bytes=536870912"));  // The default 512Mi.
  assert.ok(args(["--set", "scheduler.resources.limits.memory=3G"]).includes("--max-memory-bytes=3000000000"));
  assert.equal(args(["--set", "scheduler.resources.limits=null"]).filter((a) => a.startsWith("--max-memory-bytes")).length, 0);
  assert.match(renderFails(["--set", "scheduler.resources.limits.memory=1.5Gi"]), /write a whole number with k, M, G/);
});

test("pods run restricted: non-root, read-only root, no capabilities, RuntimeDefault seccomp", () => {
  for (const deployment of render().filter((o) => o.kind === "Deployment")) {
    const pod = podSpec(deployment);
    assert.equal(pod.securityContext.runAsNonRoot, true);
    assert.equal(pod.securityContext.seccompProfile.type, "RuntimeDefault");
    assert.equal(pod.automountServiceAccountToken, false);
    const security = pod.containers[0].securityContext;
    assert.equal(security.readOnlyRootFilesystem, true);
    assert.equal(security.allowPrivilegeEscalation, false);
    assert.deepEqual(security.capabilities.drop, ["ALL"]);
  }
});

test("selector labels are the immutable subset of the pod labels", () => {
  for (const deployment of render().filter((o) => o.kind === "Deployment")) {
    const selector = deployment.spec.selector.matchLabels;
    assert.deepEqual(Object.keys(selector).sort(), ["app.kubernetes.io/component", "app.kubernetes.io/instance", "app.kubernetes.io/name"]);
    for (const [key, value] of Object.entries(selector)) assert.equal(deployment.spec.template.metadata.labels[key], value);
    assert.equal(deployment.spec.template.metadata.labels["app.kubernetes.io/managed-by"], "Helm");
  }
  const scheduler = find(render(), "Deployment", "-scheduler");
  assert.equal(scheduler.spec.replicas, 1);
  assert.equal(scheduler.spec.strategy.type, "Recreate");
});

test("dashboards ship as ConfigMaps for the Grafana sidecar, and can be switched off", () => {
  const maps = render().filter((o) => o.kind === "ConfigMap" && o.metadata.labels.grafana_dashboard === "1");
  assert.equal(maps.length, 3);
  for (const map of maps) {
    for (const json of Object.values(map.data)) assert.match(JSON.parse(json).uid, /^dhpt-/);
  }
  assert.equal(render(["--set", "dashboards.enabled=false"]).filter((o) => o.kind === "ConfigMap").length, 0);
});

test("scrape annotations point at the metrics ports; ServiceMonitor only where the CRD exists", () => {
  for (const deployment of render().filter((o) => o.kind === "Deployment")) {
    const annotations = deployment.spec.template.metadata.annotations;
    const metrics = container(deployment).ports.find((p) => p.name === "metrics").containerPort;
    assert.equal(annotations["prometheus.io/scrape"], "true");
    assert.equal(annotations["prometheus.io/port"], String(metrics));
  }
  assert.equal(render().filter((o) => o.apiVersion.startsWith("monitoring.coreos.com")).length, 0);
  const monitors = render(withMonitoring).filter((o) => o.apiVersion.startsWith("monitoring.coreos.com"));
  assert.deepEqual(monitors.map((o) => o.kind).sort(), ["PodMonitor", "PodMonitor", "ServiceMonitor"]);
});

test("the schema rejects malformed values with a message that names them", () => {
  const cases = [
    [["--set", "cpuWorker.gpuNodes=sometimes"], "/cpuWorker/gpuNodes"],
    [["--set", "gpuWorker.replicas=-1"], "/gpuWorker/replicas"],
    [["--set", "gpuWorker.device=tpu"], "/gpuWorker/device"],
    [["--set", "cpuWorker.replica=3"], "replica"],
    [["--set", "scheduler.grpcPort=70000"], "/scheduler/grpcPort"],
    [["--set", "gpuNodeLabel.key=bad key"], "/gpuNodeLabel/key"],
    [["--set-json", "gpuNodeLabel.values=[]"], "/gpuNodeLabel/values"],
    [["--set", "cpuWorker.slots=0"], "/cpuWorker/slots"],
    [["--set", "scheduler.heartbeatInterval=soon"], "/scheduler/heartbeatInterval"],
    [["--set", "security.tls.enabled=true"], "/security/tls/secretName"],
    [["--set", "security.token.enabled=true"], "/security/tls/enabled"],
    [["--set", "security.tls.insecure=true"], "insecure"],
    [["--set", "cpuWorker.labels.board=pi 4"], "/cpuWorker/labels"],
  ];
  for (const [args, field] of cases) assert.match(renderFails(args), new RegExp(field.replace(/[/]/g, "\\/")), args.join(" "));
});

test("Workers read CSV files only from the data volume, mounted read-only", () => {
  const objects = render(["--set", "data.volume.hostPath.path=/srv/dhpt-data"]);
  for (const suffix of ["-cpu-worker", "-gpu-worker"]) {
    const worker = find(objects, "Deployment", suffix);
    assert.ok(container(worker).args.includes("--data-root=/data"), suffix);
    const mount = container(worker).volumeMounts.find((m) => m.name === "data");
    assert.equal(mount.mountPath, "/data");
    assert.equal(mount.readOnly, true);
    const volume = podSpec(worker).volumes.find((v) => v.name === "data");
    assert.equal(volume.hostPath.path, "/srv/dhpt-data");
  }
  // None by default: no root, so no CSV file is read.
  assert.ok(!container(find(render(), "Deployment", "-cpu-worker")).args.some((a) => a.startsWith("--data-root")));
});

test("registered commands reach each worker as a mounted commands file, and none by default", () => {
  const objects = render(["-f", path.join(chart, "ci", "commands-values.yaml")]);
  const expected = {
    cpu: [
      { name: "gbr", command: ["/usr/bin/python3", "/models/sklearn_gbr.py", "--data", "/data/a, b.csv"], env: ["HF_HOME"], grace_period_seconds: 30 },
      { name: "quadratic", command: ["/models/quadratic.sh"] },
    ],
    gpu: [{ name: "torch-train", command: ["/usr/bin/python3", "/models/train.py"] }],
  };
  for (const [kind, commands] of Object.entries(expected)) {
    const worker = find(objects, "Deployment", `-${kind}-worker`);
    const configMap = find(objects, "ConfigMap", `-${kind}-worker-commands`);
    // The worker's own YAML: snake_case keys, every argument (commas and spaces too) whole.
    assert.deepEqual(parseAllDocuments(configMap.data["commands.yaml"])[0].toJS(), commands, kind);
    assert.ok(container(worker).args.includes("--commands-file=/etc/dhpt/commands/commands.yaml"), kind);
    assert.deepEqual(container(worker).volumeMounts.find((m) => m.name === "commands"),
      { name: "commands", mountPath: "/etc/dhpt/commands", readOnly: true });
    assert.equal(podSpec(worker).volumes.find((v) => v.name === "commands").configMap.name, configMap.metadata.name);
    // A changed list restarts the workers, which read it at start.
    assert.match(worker.spec.template.metadata.annotations["checksum/commands"], /^[0-9a-f]{64}$/);
  }
  const plain = render();
  assert.equal(plain.filter((o) => o.metadata.name.endsWith("-commands")).length, 0);
  for (const suffix of ["-cpu-worker", "-gpu-worker"]) {
    assert.ok(!container(find(plain, "Deployment", suffix)).args.some((a) => a.startsWith("--commands-file")));
  }
  const bad = [
    [["--set-json", 'cpuWorker.commands=[{"name":"x","command":["python3","t.py"]}]'], "/cpuWorker/commands/0/command/0"],
    [["--set-json", 'gpuWorker.commands=[{"name":"-x","command":["/bin/true"]}]'], "/gpuWorker/commands/0/name"],
    [["--set-json", 'cpuWorker.commands=[{"name":"x","command":["/bin/true"],"env":["A-B"]}]'], "/cpuWorker/commands/0/env/0"],
    [["--set-json", 'cpuWorker.commands=[{"name":"x","command":[]}]'], "/cpuWorker/commands/0/command"],
    [["--set-json", 'cpuWorker.commands=[{"name":"x","cmd":["/bin/true"]}]'], "/cpuWorker/commands/0"],
  ];
  for (const [args, field] of bad) assert.match(renderFails(args), new RegExp(field.replace(/[/]/g, "\\/")), args.join(" "));
});

test("TLS and the token reach the scheduler and every worker, from Secrets", () => {
  const objects = render(["-f", path.join(chart, "ci", "secure-values.yaml")]);
  const scheduler = find(objects, "Deployment", "-scheduler");
  const args = container(scheduler).args;
  for (const flag of ["--tls-cert=/etc/dhpt/tls/tls.crt", "--tls-key=/etc/dhpt/tls/tls.key",
                      "--tls-client-ca=/etc/dhpt/tls/ca.crt", "--auth-token-file=/etc/dhpt/token/token",
                      "--worker-token-file=/etc/dhpt/token/worker-token"]) {
    assert.ok(args.includes(flag), `scheduler ${flag}`);
  }
  // The kubelet's gRPC probes cannot speak TLS: TCP probes on the gRPC port instead.
  for (const probe of ["startupProbe", "livenessProbe", "readinessProbe"]) {
    assert.equal(container(scheduler)[probe].grpc, undefined);
    assert.equal(container(scheduler)[probe].tcpSocket.port, "grpc");
  }
  const token = find(objects, "Secret", "-token");
  assert.ok(Buffer.from(token.data.token, "base64").toString().length >= 32, "a long random token");
  assert.ok(Buffer.from(token.data["worker-token"], "base64").toString().length >= 32, "a worker token");
  assert.notEqual(token.data.token, token.data["worker-token"]);
  for (const suffix of ["-cpu-worker", "-gpu-worker"]) {
    const worker = find(objects, "Deployment", suffix);
    const c = container(worker);
    for (const flag of ["--tls-ca=/etc/dhpt/tls/ca.crt", "--tls-cert=/etc/dhpt/client-tls/tls.crt",
                        "--auth-token-file=/etc/dhpt/token/worker-token"]) {
      assert.ok(c.args.includes(flag), `${suffix} ${flag}`);
    }
    const volumes = Object.fromEntries(podSpec(worker).volumes.map((v) => [v.name, v]));
    assert.equal(volumes.tls.secret.secretName, "dhpt-scheduler-tls");
    assert.equal(volumes.token.secret.secretName, token.metadata.name);
    // Only the workers' key: a worker pod never holds the users' token.
    assert.deepEqual(volumes.token.secret.items, [{key: "worker-token", path: "worker-token"}]);
    for (const mount of c.volumeMounts.filter((m) => m.mountPath.startsWith("/etc/dhpt"))) {
      assert.ok(mount.readOnly && volumes[mount.name], `${suffix} mounts ${mount.name} read-only`);
    }
  }
  // A user's own token Secret is used as it is: the chart makes none.
  const own = render(["-f", path.join(chart, "ci", "secure-values.yaml"),
                      "--set", "security.token.existingSecret=my-token"]);
  assert.equal(own.filter((o) => o.kind === "Secret").length, 0);
  assert.equal(podSpec(find(own, "Deployment", "-scheduler")).volumes.find((v) => v.name === "token").secret.secretName, "my-token");
  // Off by default: plaintext, gRPC probes, no Secret.
  const plain = render();
  assert.equal(plain.filter((o) => o.kind === "Secret").length, 0);
  assert.ok(!container(find(plain, "Deployment", "-cpu-worker")).args.some((a) => a.startsWith("--tls")));
});

test("NOTES print the grpcurl commands", () => {
  const notes = helmRun(["install", "t", chart, "--dry-run=client", "--namespace", "tuning"]);
  assert.match(notes, /grpcurl -plaintext -d @ localhost:50051 dhpt\.v1\.StudyService\/CreateStudy/);
  assert.match(notes, /kubectl label node NODE gpu=orin/);
  const secure = helmRun(["install", "t", chart, "--dry-run=client", "-f", path.join(chart, "ci", "secure-values.yaml")]);
  assert.match(secure, /grpcurl -cacert ca\.crt -servername t-dhpt-scheduler -H "authorization: Bearer \$TOKEN" localhost:50051 list/);
});

const dbArgs = (deployment) => container(deployment).args.filter((a) => a.startsWith("--db"));

test("the scheduler's database is on a ReadWriteOnce claim by default, kept by helm uninstall", () => {
  const objects = render();
  const claims = objects.filter((o) => o.kind === "PersistentVolumeClaim");
  assert.equal(claims.length, 1);
  const [claim] = claims;
  assert.equal(claim.metadata.name, "t-dhpt-scheduler");
  assert.deepEqual(claim.spec.accessModes, ["ReadWriteOnce"]);
  assert.equal(claim.spec.resources.requests.storage, "1Gi");
  assert.equal(claim.spec.storageClassName, undefined, "the cluster's default StorageClass");
  assert.equal(claim.metadata.annotations["helm.sh/resource-policy"], "keep");

  const scheduler = find(objects, "Deployment", "-scheduler");
  assert.deepEqual(dbArgs(scheduler), ["--db=/var/lib/dhpt/scheduler.db"]);
  const mount = container(scheduler).volumeMounts.find((m) => m.mountPath === "/var/lib/dhpt");
  assert.ok(mount && !mount.readOnly, "the database directory is mounted writable");
  const volume = podSpec(scheduler).volumes.find((v) => v.name === mount.name);
  assert.equal(volume.persistentVolumeClaim.claimName, claim.metadata.name);
  // One writer: one replica, and the old pod is gone before an upgrade starts the new one.
  assert.equal(scheduler.spec.replicas, 1);
  assert.equal(scheduler.spec.strategy.type, "Recreate");
  // The non-root scheduler can write the volume: the kubelet gives it the pod's fsGroup.
  assert.equal(podSpec(scheduler).securityContext.runAsNonRoot, true);
  assert.equal(podSpec(scheduler).securityContext.fsGroup, podSpec(scheduler).securityContext.runAsGroup);
  // The workers never mount the scheduler's claim.
  for (const suffix of ["-cpu-worker", "-gpu-worker"]) {
    const worker = find(objects, "Deployment", suffix);
    assert.ok(!podSpec(worker).volumes.some((v) => v.persistentVolumeClaim?.claimName === claim.metadata.name), suffix);
    assert.equal(dbArgs(worker).length, 0, suffix);
  }
});

test("persistence values: mountPath, size, storage class and keep take effect", () => {
  const objects = render(["--set", "scheduler.persistence.mountPath=/srv/dhpt", "--set", "scheduler.persistence.size=1.5Gi",
                          "--set", "scheduler.persistence.storageClassName=local-path",
                          "--set", "scheduler.persistence.keep=false"]);
  const claim = find(objects, "PersistentVolumeClaim", "-scheduler");
  assert.equal(claim.spec.resources.requests.storage, "1.5Gi");
  assert.equal(claim.spec.storageClassName, "local-path");
  assert.equal(claim.metadata.annotations, undefined, "no keep policy");
  const scheduler = find(objects, "Deployment", "-scheduler");
  assert.deepEqual(dbArgs(scheduler), ["--db=/srv/dhpt/scheduler.db"]);
  assert.ok(container(scheduler).volumeMounts.some((m) => m.mountPath === "/srv/dhpt"));
  // "-": storageClassName "" (bind a PersistentVolume made by hand, no provisioner).
  const none = find(render(["--set", "scheduler.persistence.storageClassName=-"]), "PersistentVolumeClaim", "-scheduler");
  assert.equal(none.spec.storageClassName, "");
  // In every ci values file the --db file lies in a directory the scheduler mounts from a claim.
  for (const file of ciValues) {
    const deployment = find(render(["-f", path.join(chart, "ci", file)]), "Deployment", "-scheduler");
    const [db] = dbArgs(deployment);
    const dir = path.posix.dirname(db.slice("--db=".length));
    const mount = container(deployment).volumeMounts.find((m) => m.mountPath === dir);
    assert.ok(mount, `${file}: ${db} is on a mounted volume`);
    assert.ok(podSpec(deployment).volumes.find((v) => v.name === mount.name).persistentVolumeClaim, file);
  }
});

test("existingClaim is mounted as it is, and the chart makes no claim", async () => {
  const objects = render(["--set", "scheduler.persistence.existingClaim=dhpt-studies"]);
  for (const object of objects) await validate(object);
  assert.equal(objects.filter((o) => o.kind === "PersistentVolumeClaim").length, 0);
  const scheduler = find(objects, "Deployment", "-scheduler");
  assert.deepEqual(dbArgs(scheduler), ["--db=/var/lib/dhpt/scheduler.db"]);
  const mount = container(scheduler).volumeMounts.find((m) => m.mountPath === "/var/lib/dhpt");
  assert.equal(podSpec(scheduler).volumes.find((v) => v.name === mount.name).persistentVolumeClaim.claimName, "dhpt-studies");
  const notes = helmRun(["install", "t", chart, "--dry-run=client", "--set", "scheduler.persistence.existingClaim=dhpt-studies"]);
  assert.match(notes, /PersistentVolumeClaim dhpt-studies/);
  assert.doesNotMatch(notes, /delete pvc/, "the chart does not own a claim it did not make");
});

test("persistence off: --db=:memory:, no claim, no volume, and NOTES warn that studies are lost", async () => {
  const args = ["--set", "scheduler.persistence.enabled=false"];
  const objects = render(args);
  // ":memory:" ends in a colon: unquoted, the argument would render as a mapping, not a string.
  for (const object of objects) await validate(object);
  assert.equal(objects.filter((o) => o.kind === "PersistentVolumeClaim").length, 0);
  const scheduler = find(objects, "Deployment", "-scheduler");
  assert.deepEqual(dbArgs(scheduler), ["--db=:memory:"]);
  assert.ok(!podSpec(scheduler).volumes.some((v) => v.persistentVolumeClaim));
  assert.deepEqual(container(scheduler).volumeMounts.map((m) => m.mountPath), ["/tmp"]);
  // existingClaim means nothing while persistence is off.
  const off = render([...args, "--set", "scheduler.persistence.existingClaim=dhpt-studies"]);
  assert.ok(!podSpec(find(off, "Deployment", "-scheduler")).volumes.some((v) => v.persistentVolumeClaim));
  const notes = helmRun(["install", "t", chart, "--dry-run=client", ...args]);
  assert.match(notes, /WARNING: scheduler\.persistence\.enabled is false/);
  assert.match(notes, /lost when the scheduler pod restarts/);
  assert.doesNotMatch(helmRun(["install", "t", chart, "--dry-run=client"]), /WARNING/);
});

test("the schema rejects malformed persistence values", () => {
  const cases = [
    [["--set", "scheduler.persistence.enabled=maybe"], "/scheduler/persistence/enabled"],
    [["--set", "scheduler.persistence.mountPath=var/lib/dhpt"], "/scheduler/persistence/mountPath"],
    [["--set", "scheduler.persistence.mountPath=/var/lib/dhpt/"], "/scheduler/persistence/mountPath"],
    [["--set", "scheduler.persistence.mountPath=/"], "/scheduler/persistence/mountPath"],
    [["--set", "scheduler.persistence.mountPath=/tmp"], "/scheduler/persistence/mountPath"],
    [["--set", "scheduler.persistence.size=1GB"], "/scheduler/persistence/size"],
    [["--set", "scheduler.persistence.size=lots"], "/scheduler/persistence/size"],
    [["--set-json", "scheduler.persistence.size=10"], "/scheduler/persistence/size"],
    [["--set", "scheduler.persistence.existingClaim=My_Claim"], "/scheduler/persistence/existingClaim"],
    [["--set", "scheduler.persistence.keep=yes"], "/scheduler/persistence/keep"],
    [["--set-json", "scheduler.persistence.accessModes=[\"ReadOnlyMany\"]"], "/scheduler/persistence/accessModes/0"],
    [["--set-json", "scheduler.persistence.accessModes=[]"], "/scheduler/persistence/accessModes"],
    [["--set", "scheduler.persistence.path=/data"], "path"],
  ];
  for (const [args, field] of cases) assert.match(renderFails(args), new RegExp(field.replace(/[/]/g, "\\/")), args.join(" "));
});

test("the web dashboard is off by default; on, it reaches the scheduler with the users' token only", () => {
  assert.equal(find(render(), "Deployment", "-dashboard"), undefined);
  const objects = render(["-f", path.join(chart, "ci", "web-dashboard-values.yaml")]);
  const deployment = find(objects, "Deployment", "-dashboard");
  const c = container(deployment);
  assert.ok(c.image.endsWith("/dashboard:" + c.image.split(":").pop()));
  assert.ok(c.args.includes("--scheduler=t-dhpt-scheduler:50051"));
  assert.ok(c.args.includes("--listen=0.0.0.0:8080"));
  assert.ok(c.args.includes("--allow-stop"));
  // Behind kubectl port-forward every browser is 127.0.0.1: one address may use every connection.
  assert.ok(c.args.includes("--per-address-share=1"));
  assert.ok(c.args.includes("--auth-token-file=/etc/dhpt/token/token"));
  assert.ok(c.args.includes("--tls-ca=/etc/dhpt/tls/ca.crt"));
  const token = podSpec(deployment).volumes.find((v) => v.name === "token");
  assert.deepEqual(token.secret.items, [{key: "token", path: "token"}]);
  const service = find(objects, "Service", "-dashboard");
  assert.equal(service.spec.ports[0].port, 8080);
  assert.deepEqual(service.spec.selector, deployment.spec.selector.matchLabels);
  assert.ok(!render(["--set", "webDashboard.enabled=true"]).find((o) => o.kind === "Deployment" &&
    o.metadata.name.endsWith("-dashboard")).spec.template.spec.containers[0].args.includes("--allow-stop"));
  const shared = container(find(render(["--set", "webDashboard.enabled=true", "--set",
    "webDashboard.perAddressShare=0.25"]), "Deployment", "-dashboard"));
  assert.ok(shared.args.includes("--per-address-share=0.25"), shared.args.join(" "));
  assert.match(renderFails(["--set", "webDashboard.perAddressShare=0"]), /perAddressShare/);
  // The dashboard answers its Service's names (and addresses, localhost); an Ingress' name is added.
  assert.ok(c.args.includes("--allowed-hosts=t-dhpt-dashboard,t-dhpt-dashboard.default," +
    "t-dhpt-dashboard.default.svc,t-dhpt-dashboard.default.svc.cluster.local"), c.args.join(" "));
  const ingress = container(find(render(["--set", "webDashboard.enabled=true", "--set",
    "webDashboard.allowedHosts={dash.lab.local}"]), "Deployment", "-dashboard"));
  assert.ok(ingress.args.some((a) => a.startsWith("--allowed-hosts=") && a.endsWith(",dash.lab.local")),
    ingress.args.join(" "));
  assert.match(renderFails(["--set", "webDashboard.allowedHosts={http://x}"]), /allowedHosts/);
});
