#!/usr/bin/env python3
"""Writes tests/fixtures/text/json-schema-corpus.json: JSON Schemas of the kinds applications give
a model (extraction forms, API objects, configuration files; nested, $ref and recursion, anyOf,
patterns, bounds, formats), each with candidate documents and the verdict of Python's jsonschema
(Draft 2020-12, with its format checker) on each. tests/test_constrain.c feeds every document to
the library's matcher byte by byte and expects jsonschema's verdict.

The documents are compact JSON (json.dumps with separators (",", ":") and ensure_ascii=False) with
object keys in the schema's order, additional keys last: the form the library's grammar writes, so
that both verdicts are about the same text. Valid documents come from a small random instance
generator, invalid ones from mutating them (a key dropped or added, a value of another type, a
bound crossed, a pattern or format broken); whatever the generator does, the verdict is jsonschema's.

Needs jsonschema and rfc3339-validator (tests/requirements-server.txt: make build/venv/ok), then:
    build/venv/bin/python tools/gen_constrain_fixtures.py"""
import copy
import importlib.metadata
import json
import os
import random
import re

import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "fixtures", "text", "json-schema-corpus.json")
FUZZ_SEEDS = os.path.join(HERE, "..", "tests", "fuzz", "corpus-schema")   # the schemas again, one a file, for tests/fuzz/fuzz_schema.c

ADDRESS = {"type": "object", "properties": {
    "street": {"type": "string", "minLength": 1, "maxLength": 40},
    "city": {"type": "string", "minLength": 1, "maxLength": 30},
    "postcode": {"type": "string", "pattern": "^[0-9]{5}$"},
    "country": {"type": "string", "enum": ["DE", "FR", "US", "GB", "JP"]}},
    "required": ["street", "city", "country"], "additionalProperties": False}

SCHEMAS = {
    "receipt": {"type": "object", "properties": {
        "merchant": {"type": "string", "maxLength": 40},
        "date": {"type": "string", "format": "date"},
        "currency": {"enum": ["EUR", "USD", "GBP"]},
        "items": {"type": "array", "minItems": 1, "maxItems": 6, "items": {"type": "object", "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 30},
            "quantity": {"type": "integer", "minimum": 1, "maximum": 99},
            "price": {"type": "number", "minimum": 0, "maximum": 10000}},
            "required": ["name", "price"], "additionalProperties": False}},
        "total": {"type": "number", "minimum": 0}},
        "required": ["merchant", "items", "total"], "additionalProperties": False},
    "person": {"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "email": {"type": "string", "format": "email"}, "address": {"$ref": "#/$defs/address"}},
        "required": ["name"], "$defs": {"address": ADDRESS}},
    "person_closed": {"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "nickname": {"type": ["string", "null"]}},
        "required": ["name", "age"], "additionalProperties": False},
    "product": {"type": "object", "properties": {
        "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
        "title": {"type": "string", "minLength": 3, "maxLength": 60},
        "price": {"type": "number", "exclusiveMinimum": 0, "maximum": 100000},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 5},
        "in_stock": {"type": "boolean"},
        "dimensions": {"type": "object", "properties": {
            "w": {"type": "number", "minimum": 0}, "h": {"type": "number", "minimum": 0}, "d": {"type": "number", "minimum": 0}},
            "required": ["w", "h"]}},
        "required": ["sku", "title", "price"]},
    "api_error": {"type": "object", "properties": {
        "error": {"type": "object", "properties": {
            "code": {"type": "integer", "minimum": 100, "maximum": 599},
            "message": {"type": "string"},
            "details": {"type": "array", "items": {"type": "object", "additionalProperties": {"type": "string"}}}},
            "required": ["code", "message"], "additionalProperties": False}},
        "required": ["error"], "additionalProperties": False},
    "page": {"type": "object", "properties": {
        "data": {"type": "array", "items": {"$ref": "#/$defs/user"}},
        "next_cursor": {"type": ["string", "null"]},
        "total": {"type": "integer", "minimum": 0}},
        "required": ["data", "next_cursor"], "additionalProperties": False,
        "$defs": {"user": {"type": "object", "properties": {
            "id": {"type": "string", "format": "uuid"}, "login": {"type": "string", "pattern": "^[a-z][a-z0-9_]{2,15}$"},
            "created": {"type": "string", "format": "date-time"}},
            "required": ["id", "login"], "additionalProperties": False}}},
    "server_config": {"type": "object", "properties": {
        "host": {"type": "string", "default": "127.0.0.1"},
        "port": {"type": "integer", "minimum": 1, "maximum": 65535},
        "workers": {"type": "integer", "minimum": 1, "maximum": 64},
        "log_level": {"enum": ["debug", "info", "warn", "error"]},
        "tls": {"type": "object", "properties": {"cert": {"type": "string"}, "key": {"type": "string"}},
                "required": ["cert", "key"], "additionalProperties": False},
        "timeouts": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}}},
        "required": ["port"], "additionalProperties": False},
    "event": {"type": "object", "properties": {
        "title": {"type": "string", "maxLength": 50}, "start": {"type": "string", "format": "date-time"},
        "end": {"type": "string", "format": "date-time"}, "daily_at": {"type": "string", "format": "time"},
        "attendees": {"type": "array", "items": {"type": "string", "format": "email"}, "maxItems": 4}},
        "required": ["title", "start"], "additionalProperties": False},
    "registration": {"type": "object", "properties": {
        "user_id": {"type": "string", "format": "uuid"},
        "phone": {"type": "string", "pattern": "^\\+[1-9][0-9]{6,12}$"},
        "birthday": {"type": "string", "format": "date"},
        "accepted_terms": {"const": True}},
        "required": ["user_id", "accepted_terms"]},
    "geo": {"type": "object", "properties": {
        "lat": {"type": "number", "minimum": -90, "maximum": 90},
        "lon": {"type": "number", "minimum": -180, "maximum": 180},
        "alt_m": {"type": "integer", "minimum": -500, "maximum": 9000}},
        "required": ["lat", "lon"], "additionalProperties": False},
    "tree": {"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {
        "value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 3}},
        "required": ["value"], "additionalProperties": False}}},
    "linked_list": {"type": "object", "properties": {"head": {"type": "string"}, "tail": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
                    "required": ["head", "tail"], "additionalProperties": False},
    "json_patch_op": {"oneOf": [
        {"type": "object", "properties": {"op": {"const": "add"}, "path": {"type": "string"}, "value": {}},
         "required": ["op", "path", "value"], "additionalProperties": False},
        {"type": "object", "properties": {"op": {"const": "remove"}, "path": {"type": "string"}},
         "required": ["op", "path"], "additionalProperties": False},
        {"type": "object", "properties": {"op": {"enum": ["move", "copy"]}, "from": {"type": "string"}, "path": {"type": "string"}},
         "required": ["op", "from", "path"], "additionalProperties": False}]},
    "shape": {"anyOf": [
        {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number", "exclusiveMinimum": 0}},
         "required": ["kind", "r"], "additionalProperties": False},
        {"type": "object", "properties": {"kind": {"const": "rect"}, "w": {"type": "integer", "minimum": 1}, "h": {"type": "integer", "minimum": 1}},
         "required": ["kind", "w", "h"], "additionalProperties": False}]},
    "demo_caption": {"type": "object", "properties": {
        "shape": {"enum": ["circle", "square", "triangle", "star"]},
        "colour": {"enum": ["red", "green", "blue", "yellow", "white", "black"]},
        "position": {"enum": ["left", "right", "top", "bottom", "centre"]}},
        "required": ["shape", "colour", "position"], "additionalProperties": False},
    "coordinates": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}, {"type": "integer", "minimum": 0}],
                    "minItems": 2, "maxItems": 3},
    "tags": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 10}, "minItems": 1, "maxItems": 4},
    "nullable_fields": {"type": "object", "properties": {"a": {"type": ["integer", "null"]}, "b": {"type": ["string", "boolean"]},
                                                         "c": {"type": ["array", "null"], "items": {"type": "integer"}}},
                        "required": ["a", "b", "c"], "additionalProperties": False},
    "extended": {"allOf": [{"$ref": "#/$defs/base"}, {"properties": {"extra": {"type": "string"}}, "required": ["extra"]}],
                 "$defs": {"base": {"type": "object", "properties": {"id": {"type": "integer", "minimum": 1}}, "required": ["id"]}}},
    "props_beside_anyof": {"type": "object", "properties": {"kind": {"enum": ["a", "b"]}, "n": {"type": "integer"}},
                           "required": ["kind"], "anyOf": [{"required": ["n"]}, {"properties": {"kind": {"const": "a"}}}],
                           "additionalProperties": False},
    "string_map": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 9}},
    "any_json": {},
    "any_true": True,
    "any_object": {"type": "object"},
    "enum_mixed": {"enum": ["yes", "no", 1, 2.5, None, True, {"k": [1, 2]}, [3, "x"]]},
    "const_obj": {"const": {"version": 2, "name": "v2"}},
    "ticket_code": {"type": "string", "pattern": "^(BUG|FEAT)-[0-9]{1,5}$"},
    "contains_word": {"type": "string", "pattern": "urgent"},
    "hex_colour": {"type": "string", "pattern": "^#[0-9a-fA-F]{6}$"},
    "slug": {"type": "string", "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$"},
    "version": {"type": "string", "pattern": "^v?\\d+\\.\\d+(\\.\\d+)?$"},
    "quoted_pattern": {"type": "string", "pattern": "^say \"[^\"]*\"$"},
    "short_text": {"type": "string", "minLength": 2, "maxLength": 5},
    "temperature": {"type": "number", "minimum": -40, "exclusiveMaximum": 60},
    "percent": {"type": "integer", "minimum": 0, "maximum": 100},
    "negative_int": {"type": "integer", "exclusiveMaximum": 0},
    "big_range": {"type": "integer", "minimum": -123456, "maximum": 987654321},
    "probability": {"type": "number", "minimum": 0, "maximum": 1},
    "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "integer", "minimum": -9, "maximum": 9}, "minItems": 2, "maxItems": 2},
               "minItems": 2, "maxItems": 2},
    "invoice": {"type": "object", "properties": {
        "number": {"type": "string", "pattern": "^INV-[0-9]{6}$"}, "issued": {"type": "string", "format": "date"},
        "seller": {"$ref": "#/$defs/party"}, "buyer": {"$ref": "#/$defs/party"},
        "lines": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {
            "description": {"type": "string", "minLength": 1}, "amount": {"type": "number", "minimum": 0},
            "vat_rate": {"enum": [0, 7, 19]}}, "required": ["description", "amount"], "additionalProperties": False}},
        "paid": {"type": "boolean"}},
        "required": ["number", "seller", "buyer", "lines"], "additionalProperties": False,
        "$defs": {"party": {"type": "object", "properties": {"name": {"type": "string"}, "vat_id": {"type": ["string", "null"]},
                                                              "address": ADDRESS}, "required": ["name"], "additionalProperties": False}}},
    "github_issue": {"type": "object", "properties": {
        "title": {"type": "string", "minLength": 1, "maxLength": 80}, "body": {"type": "string"},
        "labels": {"type": "array", "items": {"enum": ["bug", "enhancement", "question", "docs"]}, "maxItems": 3},
        "assignee": {"anyOf": [{"type": "string", "pattern": "^[A-Za-z0-9-]{1,39}$"}, {"type": "null"}]},
        "milestone": {"type": "integer", "minimum": 1}},
        "required": ["title"]},
    "k8s_container": {"type": "object", "properties": {
        "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}, "image": {"type": "string", "minLength": 1},
        "ports": {"type": "array", "items": {"type": "object", "properties": {
            "containerPort": {"type": "integer", "minimum": 1, "maximum": 65535}, "protocol": {"enum": ["TCP", "UDP"]}},
            "required": ["containerPort"], "additionalProperties": False}},
        "env": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "value": {"type": "string"}},
                                           "required": ["name"], "additionalProperties": False}}},
        "required": ["name", "image"], "additionalProperties": False},
    "sentiment": {"type": "object", "properties": {"label": {"enum": ["positive", "negative", "neutral"]},
                                                   "score": {"type": "number", "minimum": 0, "maximum": 1}},
                  "required": ["label", "score"], "additionalProperties": False},
    "entities": {"type": "object", "properties": {"entities": {"type": "array", "items": {"type": "object", "properties": {
        "text": {"type": "string"}, "type": {"enum": ["PERSON", "ORG", "PLACE", "DATE"]},
        "start": {"type": "integer", "minimum": 0}, "end": {"type": "integer", "minimum": 0}},
        "required": ["text", "type"], "additionalProperties": False}}}, "required": ["entities"], "additionalProperties": False},
    "expression": {"$ref": "#/$defs/expr", "$defs": {"expr": {"anyOf": [
        {"type": "integer"},
        {"type": "object", "properties": {"op": {"enum": ["+", "-", "*"]}, "args": {"type": "array", "items": {"$ref": "#/$defs/expr"}, "minItems": 2, "maxItems": 2}},
         "required": ["op", "args"], "additionalProperties": False}]}}},
    "feature_flags": {"type": "object", "properties": {"flags": {"type": "object", "additionalProperties": {"type": "boolean"}}},
                      "required": ["flags"], "additionalProperties": False},
    "unicode_keys": {"type": "object", "properties": {"名前": {"type": "string"}, "größe": {"type": "integer"}},
                     "required": ["名前"], "additionalProperties": False},
    "escaped_key": {"type": "object", "properties": {"a\"b": {"type": "integer"}, "c\\d": {"type": "string"}}, "additionalProperties": False},
    "open_object_required_extra": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a", "b"]},
    "items_false": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
    "bool_or_int_list": {"type": "array", "items": {"type": ["boolean", "integer"]}},
    "date_only": {"type": "string", "format": "date"},
    "time_only": {"type": "string", "format": "time"},
    "uuid_only": {"type": "string", "format": "uuid"},
    "email_only": {"type": "string", "format": "email"},
}

# Strings the instance generator offers for a pattern (the verdict is jsonschema's all the same).
PATTERN_SAMPLES = {
    "^[0-9]{5}$": ["10115", "75001", "02134"],
    "^[A-Z]{3}-[0-9]{4}$": ["ABC-1234", "XYZ-0001"],
    "^[a-z][a-z0-9_]{2,15}$": ["alice", "bob_99", "c3po"],
    "^\\+[1-9][0-9]{6,12}$": ["+4930123456", "+14155550100"],
    "^(BUG|FEAT)-[0-9]{1,5}$": ["BUG-1", "FEAT-12345"],
    "urgent": ["urgent", "this is urgent!", "not urgent at all"],
    "^#[0-9a-fA-F]{6}$": ["#a1B2c3", "#000000"],
    "^[a-z0-9]+(-[a-z0-9]+)*$": ["hello-world", "a1", "x-y-z"],
    "^v?\\d+\\.\\d+(\\.\\d+)?$": ["v1.2", "10.0.3", "0.1"],
    "^say \"[^\"]*\"$": ["say \"hi\"", "say \"\""],
    "^[A-Za-z0-9-]{1,39}$": ["octocat", "a-b"],
    "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$": ["web", "api-server", "x"],
    "^INV-[0-9]{6}$": ["INV-000042"],
}
FORMAT_SAMPLES = {
    "date": ["2024-02-29", "2023-12-31", "1999-01-01", "2000-02-29"],
    "time": ["12:30:00Z", "23:59:59+02:00", "00:00:00.5-05:30"],
    "date-time": ["2024-05-01T08:00:00Z", "2023-11-30T23:59:59.123+01:00"],
    "uuid": ["123e4567-e89b-12d3-a456-426614174000", "ABCDEF01-2345-6789-abcd-ef0123456789"],
    "email": ["a@example.com", "first.last+tag@mail.example.org"],
}
BAD_FORMAT = {"date": ["2023-02-29", "2024-13-01", "2024-1-01"], "time": ["24:00:00Z", "12:30:00"],
              "date-time": ["2024-05-01 08:00:00Z", "2024-02-30T00:00:00Z"], "uuid": ["123e4567e89b12d3a456426614174000"],
              "email": ["no-at-sign"]}
# The library's email grammar (manual section 12): jsonschema's check asks only for an "@", so a valid
# document whose emails this leaves out is marked "subset": false (the test then asks only that the
# matcher accepts nothing invalid).
EMAIL_RE = re.compile(r"[A-Za-z0-9_+-]([A-Za-z0-9_+.-]*[A-Za-z0-9_+-])?@[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)+")
TEXT = ["", "a", "hello", "Grüße", "日本語", "tab\there", "quote\"s", "back\\slash", "line\nbreak", "emoji 🎉", "x" * 12]


def resolve(root, s):
    while isinstance(s, dict) and "$ref" in s and len([k for k in s if k not in ("$defs",)]) == 1:
        ref = s["$ref"]
        t = root
        for part in ref[2:].split("/") if ref != "#" else []:
            t = t[part]
        s = t
    return s


def merged(root, s):
    """allOf and $ref folded into one dict (enough for the corpus's schemas)."""
    s = resolve(root, s)
    if not isinstance(s, dict):
        return s
    out = {k: v for k, v in s.items() if k not in ("allOf", "$ref")}
    parts = list(s.get("allOf", []))
    if "$ref" in s:
        parts.append({"$ref": s["$ref"]})
    for p in parts:
        p = merged(root, p)
        for k, v in p.items():
            if k == "properties":
                out.setdefault("properties", {}).update(v)
            elif k == "required":
                out["required"] = list(dict.fromkeys(out.get("required", []) + v))
            else:
                out.setdefault(k, v)
    return out


def gen(root, s, rng, depth=0):
    s = merged(root, s)
    if s is True or s == {}:
        return rng.choice([1, "x", None, True, [1, 2], {"k": "v"}])
    if "anyOf" in s or "oneOf" in s:
        branch = rng.choice(s.get("anyOf") or s.get("oneOf"))
        rest = {k: v for k, v in s.items() if k not in ("anyOf", "oneOf")}
        if depth > 4:   # recursion: prefer the branch without objects
            for b in s.get("anyOf") or s.get("oneOf"):
                if merged(root, b).get("type") in ("integer", "null"):
                    branch = b
        return gen(root, {"allOf": [rest, branch]} if rest else branch, rng, depth + 1)
    if "const" in s:
        return copy.deepcopy(s["const"])
    if "enum" in s:
        return copy.deepcopy(rng.choice(s["enum"]))
    t = s.get("type", rng.choice(["object", "string", "integer"]))
    if isinstance(t, list):
        t = rng.choice(t)
        if depth > 4 and "null" in s.get("type"):
            t = "null"
    if t == "null":
        return None
    if t == "boolean":
        return rng.choice([True, False])
    if t == "integer":
        lo = s.get("minimum", s.get("exclusiveMinimum", -1000) + 1 if "exclusiveMinimum" in s else -1000)
        hi = s.get("maximum", s.get("exclusiveMaximum", 100000) - 1 if "exclusiveMaximum" in s else 100000)
        return rng.choice([lo, hi, rng.randint(int(lo), int(hi))])
    if t == "number":
        lo = s.get("minimum", s.get("exclusiveMinimum", -1000))
        hi = s.get("maximum", s.get("exclusiveMaximum", 1000))
        v = round(rng.uniform(lo, hi), 2)
        if v == int(v):
            v = round(v + 0.25, 2)
        return rng.choice([v, int(lo) + 1 if int(lo) + 1 < hi else v])
    if t == "string":
        if "pattern" in s:
            return rng.choice(PATTERN_SAMPLES[s["pattern"]])
        if "format" in s:
            return rng.choice(FORMAT_SAMPLES[s["format"]])
        txt = rng.choice(TEXT)
        lo, hi = s.get("minLength", 0), s.get("maxLength", 60)
        while len(txt) < lo:
            txt += "y"
        return txt[:hi]
    if t == "array":
        pre = s.get("prefixItems", [])
        lo, hi = s.get("minItems", 0), s.get("maxItems", 4 if depth < 3 else 1)
        n = rng.randint(lo, max(lo, hi))
        out = []
        for i in range(n):
            if i < len(pre):
                out.append(gen(root, pre[i], rng, depth + 1))
            elif s.get("items", True) is not False:
                out.append(gen(root, s.get("items", {}), rng, depth + 1))
        return out
    # object
    props = s.get("properties", {})
    req = set(s.get("required", []))
    out = {}
    for k, v in props.items():
        if k in req or (rng.random() < 0.6 and depth < 5):
            out[k] = gen(root, v, rng, depth + 1)
    ap = s.get("additionalProperties", True)
    for k in req:
        if k not in out:
            out[k] = gen(root, ap if isinstance(ap, dict) else {}, rng, depth + 1)
    if ap is not False and rng.random() < 0.4:
        out["extra_%d" % rng.randint(0, 9)] = gen(root, ap if isinstance(ap, dict) else {"type": "string"}, rng, depth + 1)
    return out


def mutate(doc, rng):
    """One change somewhere in the document (the verdict on the result is jsonschema's)."""
    doc = copy.deepcopy(doc)
    spots = []

    def walk(v, parent, key):
        spots.append((parent, key, v))
        if isinstance(v, dict):
            for k in list(v):
                walk(v[k], v, k)
        elif isinstance(v, list):
            for i in range(len(v)):
                walk(v[i], v, i)
    walk(doc, None, None)
    parent, key, v = rng.choice(spots)
    kind = rng.choice(["type", "drop", "add", "bound", "string", "list"])
    new = v
    if kind == "type":
        new = rng.choice([None, True, 7, -3, 2.5, "s", [], {}])
    elif kind == "drop" and isinstance(v, dict) and v:
        del v[rng.choice(list(v))]
    elif kind == "add" and isinstance(v, dict):
        v["zz_extra"] = rng.choice([1, "x"])
    elif kind == "bound" and isinstance(v, (int, float)) and not isinstance(v, bool):
        new = v + rng.choice([1, -1, 1000, -1000])
    elif kind == "string" and isinstance(v, str):
        new = rng.choice([v + "x", v[:-1], v.upper(), v + "!", "-" + v, v.replace("-", "")])
    elif kind == "list" and isinstance(v, list):
        if v and rng.random() < 0.5:
            v.pop()
        else:
            v.append(copy.deepcopy(v[0]) if v else 1)
    if parent is None:
        return new
    parent[key] = new
    return doc


def dump(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def main():
    rng = random.Random(41)
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    assert "date-time" in checker.checkers and "time" in checker.checkers, "install rfc3339-validator"
    cases = []
    for name, schema in SCHEMAS.items():
        jsonschema.Draft202012Validator.check_schema(schema)
        val = jsonschema.Draft202012Validator(schema, format_checker=checker)
        strict_checker = copy.deepcopy(checker)
        strict_checker.checks("email")(lambda s: not isinstance(s, str) or EMAIL_RE.fullmatch(s) is not None)
        strict = jsonschema.Draft202012Validator(schema, format_checker=strict_checker)
        seen = {}
        tries = 0
        while len(seen) < 32 and tries < 600:
            tries += 1
            d = gen(schema, schema, rng)
            if tries % 3 != 0:
                d = mutate(d, rng)
            text = dump(d)
            if text not in seen:
                seen[text] = val.is_valid(d)
        for bad in (BAD_FORMAT.get(schema.get("format")) if isinstance(schema, dict) else None) or []:
            seen[dump(bad)] = val.is_valid(bad)
        docs = []
        for t, ok in seen.items():
            d = {"text": t, "valid": ok}
            if ok and not strict.is_valid(json.loads(t)):
                d["subset"] = False
            docs.append(d)
        cases.append({"name": name, "schema": schema, "docs": docs})
        print(f"{name}: {sum(d['valid'] for d in docs)} valid, {sum(not d['valid'] for d in docs)} invalid")
    os.makedirs(FUZZ_SEEDS, exist_ok=True)
    for c in cases:
        with open(os.path.join(FUZZ_SEEDS, c["name"] + ".json"), "w", encoding="utf-8") as f:
            f.write(dump(c["schema"]))
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump({"generator": "tools/gen_constrain_fixtures.py", "jsonschema": importlib.metadata.version("jsonschema"),
                   "cases": cases}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(cases)} schemas, {sum(len(c['docs']) for c in cases)} documents -> {OUT}")


if __name__ == "__main__":
    main()
