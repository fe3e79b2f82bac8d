#!/usr/bin/python3
"""Writes the msgpack test vectors of core/wire into this directory.

Run with Debian's interpreter (python3-numpy, python3-msgpack):

    /usr/bin/python3 core/wire/testdata/make_vectors.py

Every vector is packed exactly as plugrl's Python side packs it: msgpack.packb
with the numpy convention of SPEC 3.2 (the encode hook below is copied from
plugrl_protocol/msgpack_numpy.py, not imported, so this repository stands
alone). vectors.json describes what each file must decode to; the Go tests
read both. The infer and feedback vectors are built from the same formulas
that vectors_test.go uses to build its Infer and Feedback values, so the
Go encoder's output must equal these files byte for byte.

The output is deterministic: rerunning the script rewrites identical files.
"""

import hashlib
import json
import os

import msgpack
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

# --- copied from plugrl_protocol/msgpack_numpy.py (SPEC 3.2) ---------------

_REJECTED_KINDS = ("V", "O", "c")


def _encode(obj):
    if isinstance(obj, (np.ndarray, np.generic)) and obj.dtype.kind in _REJECTED_KINDS:
        raise ValueError(f"dtype {obj.dtype} has no wire form")
    if isinstance(obj, np.ndarray):
        array = np.ascontiguousarray(obj)
        return {
            b"__ndarray__": True,
            b"data": array.tobytes(),
            b"dtype": array.dtype.str,
            b"shape": list(array.shape),
        }
    if isinstance(obj, np.generic):
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    return obj


def packb(obj):
    return msgpack.packb(obj, default=_encode)


# ---------------------------------------------------------------------------

manifest = {"arrays": [], "scalars": [], "texts": [], "messages": []}


def write(name, obj):
    data = packb(obj)
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
    return data


def value_str(v):
    """A value as a string Go parses exactly: ints in decimal, floats in
    hex (strconv.ParseFloat reads 0x1.8p+0, inf and nan), bools as words."""
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if f != f:
            return "nan"
        if f in (float("inf"), float("-inf")):
            return "+inf" if f > 0 else "-inf"
        return f.hex()
    raise TypeError(v)


def array_vector(label, arr, raw=False):
    name = f"array_{label}.msgpack"
    if raw:
        # the map as _encode builds it, minus ascontiguousarray: numpy 1.x's
        # turns a 0-d array into shape [1], so the hook never sends shape []
        write(name, {b"__ndarray__": True, b"data": arr.tobytes(),
                     b"dtype": arr.dtype.str, b"shape": list(arr.shape)})
    else:
        write(name, arr)
        arr = np.ascontiguousarray(arr)
    host = arr.astype(arr.dtype.newbyteorder("="))
    entry = {"file": name, "dtype": arr.dtype.str, "shape": list(arr.shape)}
    if arr.size > 1024:
        # large arrays are described by digest only, to keep this file small
        entry["data_sha256"] = hashlib.sha256(arr.tobytes()).hexdigest()
        entry["host_sha256"] = hashlib.sha256(host.tobytes()).hexdigest()
        manifest["arrays"].append(entry)
        return
    entry["data_hex"] = np.ascontiguousarray(arr).tobytes().hex()
    entry["host_hex"] = np.ascontiguousarray(host).tobytes().hex()
    if arr.dtype.kind == "U":
        entry["strings"] = [str(s) for s in arr.reshape(-1)]
    else:
        entry["values"] = [value_str(v) for v in arr.reshape(-1).tolist()]
    manifest["arrays"].append(entry)


def ar(n, dtype):
    return np.arange(n).astype(dtype)


# --- ndarrays of every kind and size -----------------------------------------

array_vector("b1", np.array([True, False, True, True, False]))
array_vector("u1", np.array([0, 1, 127, 128, 255], dtype="|u1"))
array_vector("u2", np.array([0, 1, 255, 256, 65535], dtype="<u2"))
array_vector("u4", np.array([0, 1, 65536, 2**31, 2**32 - 1], dtype="<u4"))
array_vector("u8", np.array([0, 1, 2**32, 2**63 - 1, 2**64 - 1], dtype="<u8"))
array_vector("i1", np.array([0, 1, -1, 127, -128], dtype="|i1"))
array_vector("i2", np.array([0, 1, -1, 32767, -32768], dtype="<i2"))
array_vector("i4", np.array([0, 1, -1, 2**31 - 1, -(2**31)], dtype="<i4"))
array_vector("i8", np.array([0, 1, -1, 2**63 - 1, -(2**63)], dtype="<i8"))
specials = [0.0, -0.0, 1.5, -2.25, 1e-3, float("inf"), float("-inf"), float("nan")]
array_vector("f2", np.array(specials + [65504.0, 6e-8], dtype="<f2"))
array_vector("f4", np.array(specials + [3.4e38, 1e-45], dtype="<f4"))
array_vector("f8", np.array(specials + [1.7e308, 5e-324], dtype="<f8"))
# big-endian variants
array_vector("u2_be", np.array([1, 258, 65535], dtype=">u2"))
array_vector("u4_be", np.array([1, 2**24 + 2, 2**32 - 1], dtype=">u4"))
array_vector("u8_be", np.array([1, 2**56 + 2, 2**64 - 1], dtype=">u8"))
array_vector("i2_be", np.array([1, -2, 32767], dtype=">i2"))
array_vector("i4_be", np.array([1, -2, 2**31 - 1, -(2**31)], dtype=">i4"))
array_vector("i8_be", np.array([1, -2, 2**63 - 1], dtype=">i8"))
array_vector("f2_be", np.array([1.0, -2.5, float("inf")], dtype=">f2"))
array_vector("f4_be", np.array([1.0, -2.5, 1e-3, float("nan")], dtype=">f4"))
array_vector("f8_be", np.array([1.0, -2.5, 1e-300, float("-inf")], dtype=">f8"))
# shapes: 0-d, empty, multi-dimensional, dimensions of every msgpack int width
array_vector("f4_0d", np.array(3.5, dtype="<f4"))
array_vector("i8_0d", np.array(-7, dtype="<i8"))
array_vector("f4_0d_raw", np.array(3.5, dtype="<f4"), raw=True)
array_vector("i8_0d_raw_be", np.array(-7, dtype=">i8"), raw=True)
array_vector("U_0d_raw", np.array("solo"), raw=True)
array_vector("f4_empty", np.zeros((0,), dtype="<f4"))
array_vector("u1_empty_4d", np.zeros((0, 224, 224, 3), dtype="|u1"))
array_vector("f8_empty_mid", np.zeros((3, 0, 5), dtype="<f8"))
array_vector("u1_4d", ar(2 * 3 * 4 * 3, "|u1").reshape(2, 3, 4, 3))
array_vector("u1_wide", (ar(130 * 300, "<u4") % 251).astype("|u1").reshape(130, 300))
array_vector("b1_long", np.zeros((70000,), dtype="|b1"))
array_vector("f4_3d", (ar(2 * 3 * 4, "<f4") * 0.5).reshape(2, 3, 4))
# text, SPEC 3.4
array_vector("U21", np.array(["pick up the red block", "stack"]))
array_vector("U_nonascii", np.array(["héllo wörld", "☃", "🤖 robot", "日本語のテキスト"]))
array_vector("U1_empty_strings", np.array(["", "", ""]))
array_vector("U_be", np.array(["abc", "ü€🤖"], dtype=">U4"))
array_vector("U_2d", np.array([["a", "bc"], ["def", ""]]))
array_vector("U_0d", np.array("solo"))
array_vector("U_none", np.zeros((0,), dtype="<U3"))

# --- numpy scalars, __npgeneric__ ----------------------------------------------


def scalar_vector(label, obj, kind, value):
    name = f"scalar_{label}.msgpack"
    write(name, obj)
    manifest["scalars"].append({"file": name, "kind": kind, "value": value})


scalar_vector("int64", np.int64(-5), "i", "-5")
scalar_vector("int32", np.int32(2**31 - 1), "i", str(2**31 - 1))
scalar_vector("int8", np.int8(-128), "i", "-128")
scalar_vector("uint8", np.uint8(200), "i", "200")
scalar_vector("uint64_max", np.uint64(2**64 - 1), "u", str(2**64 - 1))
scalar_vector("uint64_small", np.uint64(300), "i", "300")
scalar_vector("bool_true", np.bool_(True), "b", "true")
scalar_vector("bool_false", np.bool_(False), "b", "false")
scalar_vector("float32", np.float32(1.25), "f", value_str(1.25))
scalar_vector("float16", np.float16(-0.5), "f", value_str(-0.5))
# np.float64 subclasses float, so msgpack packs it as a plain float64
scalar_vector("float64_plain", np.float64(2.5), "f", value_str(2.5))
scalar_vector("plain_int", 1 << 40, "i", str(1 << 40))
scalar_vector("plain_neg", -33, "i", "-33")
scalar_vector("plain_true", True, "b", "true")
scalar_vector("ndarray_0d", np.array(9, dtype=">i4"), "i", "9")
scalar_vector("ndarray_1elem", np.array([0.75], dtype="<f2"), "f", value_str(0.75))

# --- text values as DecodeText sees them -------------------------------------


def text_vector(label, obj, strings):
    name = f"text_{label}.msgpack"
    write(name, obj)
    manifest["texts"].append({"file": name, "strings": strings})


text_vector("U", np.array(["pick up the red block", "stack"]), ["pick up the red block", "stack"])
text_vector("U_nonascii", np.array(["ça", "☃🤖", ""]), ["ça", "☃🤖", ""])
text_vector("U_be", np.array(["ab", "ü"], dtype=">U2"), ["ab", "ü"])
text_vector("list", ["pick up the red block", "stack"], ["pick up the red block", "stack"])
text_vector("list_nonascii", ["ça", "☃🤖", ""], ["ça", "☃🤖", ""])
text_vector("list_bin", [b"raw", b""], ["raw", ""])
text_vector("nil", None, None)

# --- infer and feedback, exactly as EncodeInfer / EncodeFeedback build them ---
#
# The same formulas are in vectors_test.go.


def image(n, h, w, c, seed):
    i = np.arange(n * h * w * c, dtype=np.int64)
    return ((i * 7 + seed) % 256).astype("|u1").reshape(n, h, w, c)


def state(n, d, seed):
    i = np.arange(n * d, dtype=np.int64)
    return (i * 0.25 - seed).astype("<f8").reshape(n, d)


def i8(vs):
    return np.array(vs, dtype="<i8")


def b1(vs):
    return np.array(vs, dtype="|b1")


def observation(images, states, text, as_strings=False):
    return {
        "images": images,
        "states": states,
        "text": list(text) if as_strings else np.array(list(text)),
    }


def message_vector(label, obj, **extra):
    name = f"{label}.msgpack"
    write(name, obj)
    manifest["messages"].append(dict(file=name, **extra))


# infer: two cameras (in non-sorted order), a dimension of 130 so that shape
# ints need msgpack uint8, one state vector.
wrist = image(2, 3, 130, 3, 1)
front = image(2, 2, 2, 3, 5)
qpos = state(2, 7, 1)
message_vector(
    "infer_basic",
    {
        "message_type": "infer",
        "data": observation({"wrist": wrist, "front": front}, {"qpos": qpos},
                            ["pick up the red block", "stack"]),
        "env_indices": i8([3, 7]),
        "step_ids": i8([0, 12]),
    },
    kind="infer",
)
# infer with no images or states and non-ASCII text
message_vector(
    "infer_text_only",
    {
        "message_type": "infer",
        "data": observation({}, {}, ["héllo wörld ☃", "🤖", ""]),
        "env_indices": i8([0, 1, 2]),
        "step_ids": i8([5, 0, 300]),
    },
    kind="infer",
)
# infer with reuse (SPEC 10.1): env 1 is reused, so rows 0 and 2 are sent
full = image(3, 2, 2, 1, 9)
qvel = state(3, 2, 3)
message_vector(
    "infer_reuse",
    {
        "message_type": "infer",
        "data": observation({"cam": full[[0, 2]]}, {"qvel": qvel[[0, 2]]}, ["a", "ccc"]),
        "env_indices": i8([10, 11, 12]),
        "step_ids": i8([1, 2, 3]),
        "reuse": b1([False, True, False]),
    },
    kind="infer",
)
# infer with text as a msgpack string list (SPEC 3.4 Gap)
message_vector(
    "infer_text_list",
    {
        "message_type": "infer",
        "data": observation({}, {"qpos": state(1, 3, 0)}, ["go"], as_strings=True),
        "env_indices": i8([4]),
        "step_ids": i8([0]),
    },
    kind="infer",
)
# infer with empty text: numpy's width for [""] is 1
message_vector(
    "infer_empty_text",
    {
        "message_type": "infer",
        "data": observation({}, {"qpos": state(2, 1, 2)}, ["", ""]),
        "env_indices": i8([0, 1]),
        "step_ids": i8([0, 0]),
    },
    kind="infer",
)


def feedback(env, steps, obs, rewards, term, trunc, info):
    return {
        "message_type": "feedback",
        "env_indices": i8(env),
        "step_ids": i8(steps),
        "data": {
            "obs": obs,
            "rewards": np.array(rewards, dtype="<f4"),
            "terminated": b1(term),
            "truncated": b1(trunc),
            "info": info,
        },
    }


message_vector(
    "feedback_basic",
    feedback([3, 7], [1, 13],
             observation({"wrist": wrist, "front": front}, {"qpos": qpos},
                         ["pick up the red block", "stack"]),
             [1.5, -0.25], [False, False], [False, False], {}),
    kind="feedback",
)
message_vector(
    "feedback_episode",
    feedback([0, 1, 2], [4, 0, 9],
             observation({}, {"qpos": state(3, 2, 4)}, ["a", "b", "c"]),
             [0.5, 2.0, -1.0], [True, False, False], [False, False, True],
             {"episode": {
                 "r": np.array([10.5, 0.0, -3.25], dtype="<f8"),
                 "l": i8([200, 0, 1000]),
                 "s": b1([True, False, False]),
                 "mask": b1([True, False, True]),
             }}),
    kind="feedback",
)
message_vector(
    "feedback_episode_no_success",
    feedback([5], [2],
             observation({"cam": image(1, 2, 2, 3, 2)}, {}, ["x"]),
             [3.0], [False], [True],
             {"episode": {
                 "r": np.array([7.0], dtype="<f8"),
                 "l": i8([150]),
                 "mask": b1([True]),
             }}),
    kind="feedback",
)

# --- action, SPEC 5.3 ---------------------------------------------------------


def chunk(h, n, da, dtype):
    i = np.arange(h * n * da, dtype=np.float64)
    return (i * 0.5 - 1).astype(dtype).reshape(h, n, da)


def action_vector(label, data):
    act = data["action"]
    ids = data.get("env_ids")
    message_vector(
        label,
        {"message_type": "action", "data": data},
        kind="action",
        dtype=act.dtype.str,
        shape=list(act.shape),
        host_hex=act.astype(act.dtype.newbyteorder("=")).tobytes().hex(),
        env_ids=None if ids is None else [int(v) for v in ids],
    )


action_vector("action_f4", {"env_ids": i8([3, 7]), "action": chunk(4, 2, 3, "<f4")})
action_vector("action_f8", {"env_ids": i8([0]), "action": chunk(2, 1, 6, "<f8")})
action_vector("action_f4_no_ids", {"action": chunk(8, 2, 1, "<f4")})
action_vector("action_f8_no_ids", {"action": chunk(3, 3, 2, "<f8")})
action_vector("action_f4_be", {"env_ids": np.array([1, 2], dtype=">i8"), "action": chunk(2, 2, 2, ">f4")})
action_vector("action_f8_be", {"action": chunk(5, 1, 3, ">f8"), "env_ids": np.array([9], dtype=">i4")})
action_vector("action_f4_ids_after", {"action": chunk(1, 3, 2, "<f4"), "env_ids": i8([2, 0, 1])})
action_vector("action_f2", {"env_ids": np.array([4], dtype="<u2"), "action": chunk(3, 1, 2, "<f2")})
action_vector("action_da2", {"env_ids": i8([0, 1]), "action": chunk(2, 2, 6, "<f4").reshape(2, 2, 2, 3)})
action_vector("action_i4", {"env_ids": i8([0]), "action": np.array([[[1]], [[-2]]], dtype="<i4")})

# --- metadata, SPEC 5.1 -------------------------------------------------------


def metadata_vector(label, data, expect, first="message_type"):
    if first == "message_type":
        obj = {"message_type": "metadata", "data": data}
    else:
        obj = {"data": data, "message_type": "metadata"}
    message_vector(label, obj, kind="metadata", expect=expect)


metadata_vector(
    "metadata_full",
    {
        "protocol_version": 1,
        "server": "plugrl-server",
        "server_version": "0.4.2",
        "algorithm": "PPO",
        "policy": "GaussianMlpPolicy",
        "action_horizon": 8,
        "action_dim": 6,
        "features": ["reuse-feedback-obs"],
    },
    {
        "protocol_version": 1, "server": "plugrl-server", "server_version": "0.4.2",
        "algorithm": "PPO", "policy": "GaussianMlpPolicy", "action_horizon": 8,
        "action_dim": 6, "features": ["reuse-feedback-obs"],
    },
)
metadata_vector("metadata_empty", {}, {})
metadata_vector(
    "metadata_npgeneric",
    {
        "protocol_version": np.int64(1),
        "action_horizon": np.int32(16),
        "action_dim": np.uint8(7),
        "features": [],
    },
    {"protocol_version": 1, "action_horizon": 16, "action_dim": 7, "features": []},
    first="data",
)
metadata_vector(
    "metadata_unknown",
    {
        "run_id": "exp-2026-09-30/α",
        "action_dim": np.array(4, dtype="<i8"),
        "nested": {"a": {"b": [1, 2.5, None, True, "s", b"\xff\x00"]}, "arr": np.array([[1, 2]], dtype="<i2")},
        "gains": np.array([0.5, float("nan")], dtype="<f4"),
        "prompts": np.array(["a", "ü"]),
        "seed": np.uint64(2**64 - 1),
        "server": "plugrl-server",
        "big": 2**64 - 1,
        "neg": -(2**63),
        "half": np.float16(0.5),
        "flag": np.bool_(True),
        "features": ["reuse-feedback-obs", "future-thing"],
    },
    {"action_dim": 4, "server": "plugrl-server", "features": ["reuse-feedback-obs", "future-thing"]},
)
metadata_vector(
    "metadata_wrong_types",
    {
        "protocol_version": "1",
        "server": 7,
        "action_horizon": 2.5,
        "action_dim": [6],
        "features": "reuse-feedback-obs",
        "policy": None,
        "algorithm": b"PPO",
    },
    {},
)

manifest_path = os.path.join(HERE, "vectors.json")
with open(manifest_path, "w", encoding="utf-8") as f:
    json.dump(manifest, f, indent=1, ensure_ascii=False)
    f.write("\n")
