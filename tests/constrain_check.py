#!/usr/bin/env python3
"""The documents that constrained walks over Llama 3's vocabulary wrote (build/tests/test_constrain
with MMS_CONSTRAIN_DUMP, its case test_vocab_walks), validated by Python's jsonschema (Draft 2020-12
with its format checker) against their schemas in tests/fixtures/text/json-schema-corpus.json: every
one must parse (json.loads) and validate. Run by make test-full through the venv of
tests/requirements-server.txt; usage: constrain_check.py [TEST_CONSTRAIN]"""
import json
import os
import subprocess
import sys
import tempfile

import jsonschema

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def main():
    program = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "tests", "test_constrain")
    with open(os.path.join(ROOT, "tests", "fixtures", "text", "json-schema-corpus.json"), encoding="utf-8") as f:
        schemas = {c["name"]: c["schema"] for c in json.load(f)["cases"]}
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "walks.jsonl")
        env = dict(os.environ, MMS_CONSTRAIN_DUMP=dump, MMS_TEST_CASE="test_vocab_walks")
        run = subprocess.run([program], cwd=ROOT, env=env, capture_output=True, text=True)
        if run.returncode != 0:
            print(run.stdout[-4000:], run.stderr[-4000:])
            print(f"FAIL {program} exited with {run.returncode}")
            failed += 1
        with open(dump, encoding="utf-8") as f:
            lines = [json.loads(line) for line in f]
    per_case = {}
    for rec in lines:
        name, text = rec["case"], rec["doc"]
        try:
            doc = json.loads(text)
            errors = [e.message for e in jsonschema.Draft202012Validator(schemas[name], format_checker=checker).iter_errors(doc)]
        except ValueError as e:
            errors = [f"not JSON: {e}"]
        if errors:
            failed += 1
            print(f"FAIL {name}: {text[:200]}: {errors[0]}")
        else:
            passed += 1
            per_case[name] = per_case.get(name, 0) + 1
    if len(lines) < len(schemas) * 6:
        failed += 1
        print(f"FAIL only {len(lines)} documents for {len(schemas)} schemas (6 walks each)")
    print(f"PASS {passed} documents from {len(per_case)} schemas validate with jsonschema" if not failed else f"{failed} failures")
    print(f"{passed} passed, {failed} failed, 0 skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
