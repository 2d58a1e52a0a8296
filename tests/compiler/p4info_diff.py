"""Field-by-field, order-independent comparison of two P4Info messages (a helper of test_p4info_fields.py,
also runnable: `python tests/compiler/p4info_diff.py OURS.txtpb REF.txtpb` prints the differences)."""
import json
import sys

import p4sec  # noqa: F401  (sets the protobuf runtime the p4runtime package needs)
from google.protobuf import json_format, text_format
from p4.config.v1 import p4info_pb2


def load(path):
    info = p4info_pb2.P4Info()
    text_format.Parse(open(path).read(), info)
    return info


def _key(item):
    """The identity of an element of a repeated field: its preamble name, else its id, else its name."""
    if isinstance(item, dict):
        if "preamble" in item:
            return item["preamble"].get("name", item["preamble"].get("id"))
        for k in ("id", "name", "extern_type_name"):
            if k in item:
                return item[k]
    return None


def normalize(v):
    """Repeated fields become maps keyed by identity (or sorted lists when elements have none)."""
    if isinstance(v, dict):
        return {k: normalize(x) for k, x in v.items()}
    if isinstance(v, list):
        items = [normalize(x) for x in v]
        keys = [_key(x) for x in items]
        if items and all(k is not None for k in keys) and len(set(map(str, keys))) == len(keys):
            return {f"[{k}]": x for k, x in zip(keys, items)}
        return sorted(items, key=lambda x: json.dumps(x, sort_keys=True))
    return v


def as_tree(info):
    return normalize(json_format.MessageToDict(info, preserving_proto_field_name=True))


def diff(ours, ref, path=""):
    """A list of `path: ours X, reference Y` lines, one per differing leaf."""
    if isinstance(ours, dict) and isinstance(ref, dict):
        out = []
        for k in sorted(set(ours) | set(ref), key=str):
            sub = f"{path}.{k}" if path and not k.startswith("[") else f"{path}{k}"
            if k not in ours:
                out.append(f"{sub}: missing in ours (reference {json.dumps(ref[k])[:160]})")
            elif k not in ref:
                out.append(f"{sub}: only in ours ({json.dumps(ours[k])[:160]})")
            else:
                out += diff(ours[k], ref[k], sub)
        return out
    if ours != ref:
        return [f"{path}: ours {json.dumps(ours)[:160]}, reference {json.dumps(ref)[:160]}"]
    return []


def compare(ours_path, ref_path):
    return diff(as_tree(load(ours_path)), as_tree(load(ref_path)))


if __name__ == "__main__":
    d = compare(sys.argv[1], sys.argv[2])
    print("\n".join(d))
    print(f"{len(d)} differences")
