// Validates Kubernetes objects against the API's OpenAPI schemas, as shipped
// in npm's kubernetes-models (core and apps groups) and
// @kubernetes-models/prometheus-operator (ServiceMonitor). Reads a JSON array
// of objects on stdin; prints one line per object; exits 1 when any object
// fails its schema, 2 when a kind has no schema here (so a new kind is not
// passed unchecked). Used by tests/it_deploy.py.
import { readFileSync } from "node:fs";

const objs = JSON.parse(readFileSync(0, "utf8"));
let rc = 0;
for (const o of objs) {
  const [group, version] = o.apiVersion.includes("/") ? o.apiVersion.split("/") : ["", o.apiVersion];
  const what = `${o.kind} ${o.metadata?.name}`;
  const path = group === "monitoring.coreos.com"
    ? `@kubernetes-models/prometheus-operator/${group}/${version}/${o.kind}`
    : `kubernetes-models/${group ? group + "/" : ""}${version}/${o.kind}`;
  let Model;
  try {
    Model = (await import(path))[o.kind];
  } catch (e) {
    console.log(`NO SCHEMA ${what}: ${path}: ${e.message}`);
    rc = Math.max(rc, 2);
    continue;
  }
  try {
    new Model(o).validate();
    console.log(`ok ${what}`);
  } catch (e) {
    console.log(`INVALID ${what}: ${e.message}`);
    rc = Math.max(rc, 1);
  }
}
process.exit(rc);
