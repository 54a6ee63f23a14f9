#!/usr/bin/python3
"""openapi_check.py — validates real replies of cellcastd against proto/openapi.yaml.

usage: openapi_check.py OPENAPI.yaml CASES.tsv
CASES.tsv: one reply per line, tab-separated: METHOD, path template as in the document
(e.g. /v1/cells/{id}/forecast), HTTP status, Content-Type, body file.

Each reply must have its status and media type documented for the operation, and a JSON
body must validate against the documented schema, strictly: an object schema that lists
`properties` is closed (a field the document does not list fails), and `nullable` is
honoured (OpenAPI 3.0 -> JSON Schema draft 4). Exits 1 listing every mismatch.
"""
import copy
import json
import sys

import jsonschema
import yaml


def convert(node):
    """OpenAPI 3.0 schema objects -> JSON Schema draft 4, closing documented objects."""
    if isinstance(node, list):
        return [convert(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: convert(v) for k, v in node.items()}
    if out.pop("nullable", False):
        t = out.get("type")
        if t is not None:
            out["type"] = [t, "null"] if isinstance(t, str) else list(t) + ["null"]
        if "enum" in out:
            out["enum"] = list(out["enum"]) + [None]
    if "properties" in out and "additionalProperties" not in out and "allOf" not in out:
        out["additionalProperties"] = False
    for k in ("format", "example", "discriminator", "deprecated", "readOnly", "writeOnly"):
        if k in out and not isinstance(out[k], dict):
            out.pop(k)
    return out


def main():
    doc = yaml.safe_load(open(sys.argv[1]))
    comps = doc.get("components", {}).get("schemas", {})
    errors = 0
    n = 0

    def deref(s):
        while isinstance(s, dict) and "$ref" in s:
            s = comps[s["$ref"].split("/")[-1]]
        return s

    def resolve_allof(s):
        """Inline allOf (of refs and object parts) into one schema before conversion."""
        if isinstance(s, list):
            return [resolve_allof(x) for x in s]
        if not isinstance(s, dict):
            return s
        if "allOf" in s:
            merged = {"type": "object", "properties": {}}
            for part in s["allOf"]:
                part = resolve_allof(copy.deepcopy(deref(part)))
                merged["properties"].update(part.get("properties", {}))
                merged.setdefault("required", [])
                merged["required"] += part.get("required", [])
            if not merged["required"]:
                merged.pop("required")
            return merged
        return {k: resolve_allof(v) for k, v in s.items()}

    # inline every allOf, then convert the whole components tree
    comps_conv = convert(resolve_allof(copy.deepcopy(comps)))
    root = {"components": {"schemas": comps_conv}}
    for line in open(sys.argv[2]):
        if not line.strip():
            continue
        method, path, status, ctype, body = line.rstrip("\n").split("\t")
        n += 1
        where = f"{method} {path} -> {status}"
        op = doc["paths"].get(path, {}).get(method.lower())
        if op is None:
            print(f"FAIL: {where}: operation not in the document")
            errors += 1
            continue
        resp = op["responses"].get(status) or op["responses"].get("default")
        if resp is None:
            print(f"FAIL: {where}: status not documented (has {sorted(op['responses'])})")
            errors += 1
            continue
        if "$ref" in resp:
            resp = doc["components"]["responses"][resp["$ref"].split("/")[-1]]
        media = ctype.split(";")[0].strip()
        content = resp.get("content", {})
        if media not in content:
            print(f"FAIL: {where}: media type {media} not documented (has {sorted(content)})")
            errors += 1
            continue
        schema = content[media].get("schema")
        if schema is None or not media.endswith("json"):
            continue
        try:
            data = json.load(open(body))
        except ValueError as e:
            print(f"FAIL: {where}: body is not JSON: {e}")
            errors += 1
            continue
        s = convert(resolve_allof(copy.deepcopy(schema)))
        s = dict(s, components=root["components"])
        v = jsonschema.Draft4Validator(s)
        errs = sorted(v.iter_errors(data), key=lambda e: list(e.path))
        for e in errs[:5]:
            loc = "/".join(str(p) for p in e.path)
            print(f"FAIL: {where}: at /{loc}: {e.message[:300]}")
        if errs:
            errors += 1
    print(f"openapi_check: {n} replies, {errors} not as documented")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
