"""What the in-flight stage costs, counted in instructions: a figure the shared machine's
load cannot blur, for a before/after of any change to the stage.

The same fresh requests of the hop benchmark's payloads (bench/payload.py: ``mixed`` and
``harness``) go through four workloads, each in a child process of its own (so that no
workload's allocations shape another's heap) run under valgrind's callgrind:

    parse+serialize   decode and encode the whole request (upb)
    naive             the naive hop's work (bench/naive_hop.py: parse, one attribute on
                      each MCP span, serialize)
    floor             bench/floor.py: the least a pure-Python hop can do with these MCP
                      spans (shallow decode, only MCP spans read, annotations appended)
    floor+product     bench/floor_product.py: the floor plus the least of the product's
                      work per call (duplicates, layers, pairing, verdict, fingerprint,
                      turn block, circuit, the decision's annotation, a counter)
    stage             serve's stage, as bench/classify.py's ``strip`` row builds it:
                      ``Service(ServiceConfig())``, each request through its stage

Only the work is counted. Before the count the child builds its workload and gives it
one request of its own (so one-time costs, such as lazy imports and caches filled on first
use, are set-up), collects garbage, sets the collector's thresholds as serve sets them and
freezes what set-up made (as serve does); then it
asks callgrind to zero its counters (a call to ``sys.getdlopenflags``, which nothing else
calls, with ``--zero-before``) and to write them out when the work is done (a call to
``sys.getallocatedblocks``, ``--dump-before``). Each workload is counted twice, on 0
requests and on N, and the first is subtracted from the second: what remains is exactly the
N requests' work. Where this Python's binary names neither function (a stripped build),
the child is run whole, once on N requests and once on 0, and the totals subtracted: that
also counts the N requests' clean-up at exit (here within a few percent of the exact count).
With ``--parts`` the stage is also counted as bench/classify.py's rows build it up (read,
classify, pipeline, sinks; the whole stage is the last row, strip), each row in a child of
its own, and what each part adds is printed per MCP span. Instruction counts move by well
under 1% between runs: the fresh ids are random, and with
them where dicts put their keys (``PYTHONHASHSEED=0`` fixes the rest).

The run checks its work: the floor, floor+product and the stage each read as many MCP
spans as bench/classify.py counts in the same requests, the stage and floor+product with no
duplicate, the stage with no analysis error, floor+product with every call span decided or
held for its other half, the naive hop marked them all, a sample of the floor's output
decodes as OTLP with its annotation on every MCP span and is, annotations taken off, the
request received, and one of floor+product's carries a decision on every call span it
decided and on no other.

    .venv/bin/python bench/instructions.py [--requests 16] [--variants mixed,harness] [--parts]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

VARIANTS = ("mixed", "harness")
WORKLOADS = ("parse+serialize", "naive", "floor", "floor+product", "stage")
# With --parts: the stage built up a part at a time, as bench/classify.py's rows are (its
# STAGES; the whole stage is its last, "strip"), so that each part's count is the
# difference between two rows.
PARTS = ("read", "classify", "pipeline", "sinks")
PART_WORKLOADS = tuple(f"stage:{part}" for part in PARTS)
PART_NAMES = {
    "read": "read to the MCP spans, encoded",
    "classify": "+ classify: dialects, pairing",
    "pipeline": "+ engines and annotations",
    "sinks": "+ metrics and advisories",
    "strip": "+ strip_attributes",
}
ZERO_BEFORE = "sys_getdlopenflags"  # the C functions behind the two calls that mark a count
DUMP_BEFORE = "sys_getallocatedblocks"
VALGRIND = "valgrind"
CHILD_TIMEOUT_S = 1800
# The marks alone, with nothing between them, count a few thousand instructions.
MAX_EMPTY_INSTRUCTIONS = 100_000


# -- the child: under valgrind, one variant's workloads -------------------------------------


def _workload(name: str) -> tuple[Callable[[bytes], object], Callable[[], dict[str, Any]]]:
    """What the workload runs per request, and what it says afterwards for the checks."""
    if name == "parse+serialize":

        def parse_serialize(payload: bytes) -> bytes:
            return ExportTraceServiceRequest.FromString(payload).SerializeToString()

        return parse_serialize, dict
    if name == "naive":
        from naive_hop import mark_mcp_spans

        return mark_mcp_spans, dict
    if name == "floor":
        from floor import Floor

        floor = Floor()
        return floor, lambda: {"mcp_spans": floor.mcp_spans}
    if name == "floor+product":
        from floor_product import ProductFloor

        product = ProductFloor()

        def tallies() -> dict[str, Any]:
            return {
                "mcp_spans": product.mcp_spans,
                "duplicates": product.duplicates,
                "call_spans": product.call_spans,
                "decided_spans": product.decided_spans,
                "held_spans": product.held_spans,
            }

        return product, tallies
    if name == "stage" or name.startswith("stage:"):
        from classify import Run, build

        run = Run()
        # Service(ServiceConfig()): serve's stage, as serve wires it; a part: its rows so far.
        stage = build(name.partition(":")[2] or "strip", run)

        def said() -> dict[str, Any]:
            errors = run.count_errors() if run.count_errors else run.errors  # once, at the end
            return {"mcp_spans": run.mcp_spans, "duplicates": run.duplicates, "errors": errors}

        return stage, said
    raise ValueError(f"unknown workload {name!r}")


def _child(payload_file: str, name: str, requests: int, gc_threshold: list[int]) -> int:
    """One workload: set up, warm up, then count 0 requests, then ``requests`` requests."""
    with open(payload_file, "rb") as file:
        warmup, stored = pickle.load(file)
    payloads = stored[:requests]
    process, report = _workload(name)
    process(warmup)
    before = report()  # what the warm-up request added to the tallies
    gc.collect()
    gc.set_threshold(*gc_threshold)  # as serve runs (see _serve_gc_threshold), and what
    gc.freeze()  # set-up made is out of the collector's sight, as serve puts it
    nothing: list[bytes] = []
    for counted in (nothing, payloads):
        sys.getdlopenflags()  # callgrind: zero the counters
        for payload in counted:
            process(payload)  # its output dropped, as a hop drops what it sent
        sys.getallocatedblocks()  # callgrind: write the counters out
    said = {key: value - before.get(key, 0) for key, value in report().items()}
    said["threads"] = _threads()
    # The checks, after the count, on every stored request whatever was counted: the same
    # work in a run of N requests and of 0, should whole runs be subtracted.
    if name == "floor":  # a sample of its output
        from floor import Floor, check_output

        said["problems"] = check_output(stored[0], Floor()(stored[0]))
    if name == "floor+product":
        from floor_product import check_output as check_product

        said["problems"] = check_product(stored[0])
    if name == "naive":
        said["marked"] = sum(_naive_marks(cast(bytes, process(p))) for p in stored)
    print("RESULT " + json.dumps(said))
    return 0


def _threads() -> int:
    """The process's threads: any but this one would be counted with the work."""
    tasks = Path("/proc/self/task")
    return len(os.listdir(tasks)) if tasks.is_dir() else 1


def _naive_marks(forwarded: bytes) -> int:
    from payload_roles import NAIVE_ATTRIBUTE

    request = ExportTraceServiceRequest.FromString(forwarded)
    return sum(
        1
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
        for attribute in span.attributes
        if attribute.key == NAIVE_ATTRIBUTE
    )


# -- the parent: requests, valgrind runs, figures and checks --------------------------------


def _serve_gc_threshold() -> list[int]:
    """The collector's thresholds as serve sets them (server.tune_garbage_collection), read
    here and handed to the children, so that only the stage's child imports the service."""
    from processor.server import tune_garbage_collection

    before = gc.get_threshold()
    tune_garbage_collection()
    tuned = list(gc.get_threshold())
    gc.set_threshold(*before)
    gc.unfreeze()
    return tuned


def _write_payloads(variant: str, requests: int, directory: Path) -> tuple[Path, int]:
    """Fresh requests for a variant (and one more, the warm-up), saved for the children;
    and how many MCP spans the counted ones hold, as bench/classify.py counts them."""
    from classify import _mcp_spans
    from payload import Fresh, build_templates

    templates = build_templates(variant)
    fresh = Fresh(templates)
    warmup = fresh.render(templates[-1])
    payloads = [fresh.render(templates[i % len(templates)]) for i in range(requests)]
    path = directory / f"{variant}.pickle"
    with path.open("wb") as file:
        pickle.dump((warmup, payloads), file)
    return path, sum(_mcp_spans(p) for p in payloads)


def _valgrind(
    payload_file: Path, workload: str, requests: int, out: Path, marked: bool, gc_threshold: str
) -> tuple[dict[str, Any], list[tuple[str, int]]]:
    """Run the child under callgrind: what it said, and each dump's (trigger, instructions)."""
    command = [
        VALGRIND,
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        f"--log-file={out}.log",
        "--dump-instr=no",
        "--compress-pos=no",
    ]
    if marked:
        command += [f"--zero-before={ZERO_BEFORE}", f"--dump-before={DUMP_BEFORE}"]
    command += [sys.executable, __file__, "--child", str(payload_file)]
    command += ["--workload", workload, "--requests", str(requests)]
    command += ["--gc-threshold", gc_threshold]
    # One thread: numpy's OpenBLAS (bench/payload.py imports it) starts a worker thread
    # that callgrind would schedule, and count, during the work.
    env = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=CHILD_TIMEOUT_S, check=False
    )
    result = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not result:
        log = Path(f"{out}.log").read_text(errors="replace")[-1500:]
        raise SystemExit(f"the child failed ({done.returncode}): {done.stderr[-2000:]}\n{log}")
    dumps = []
    for path in sorted(out.parent.glob(out.name + "*"), key=_part_number):
        if path.suffix != ".log":
            dumps.append(_read_dump(path))
    return json.loads(result[0].removeprefix("RESULT ")), dumps


def _part_number(path: Path) -> int:
    suffix = path.name.rpartition(".")[2]
    return int(suffix) if suffix.isdigit() else 1 << 30  # the unnumbered one is the last


def _read_dump(path: Path) -> tuple[str, int]:
    trigger, total = "", -1
    with path.open(errors="replace") as file:
        for line in file:
            if line.startswith("desc: Trigger:"):
                trigger = line.removeprefix("desc: Trigger:").strip()
            elif line.startswith("summary:"):
                total = int(line.split()[1])
                break
    return trigger, total


def count(
    variant: str, workload: str, requests: int, payload_file: Path, gc_threshold: str
) -> dict[str, Any]:
    """One workload's instructions for ``requests`` requests of a variant (its own child, so
    that no other workload's allocations shape its heap), and what it said for the checks."""
    out = payload_file.parent / f"{variant}-{workload}.callgrind"
    said, dumps = _valgrind(payload_file, workload, requests, out, True, gc_threshold)
    counted = [total for trigger, total in dumps if DUMP_BEFORE in trigger]
    if len(counted) == 2:
        return {"instructions": counted[1] - counted[0], "empty": counted[0], "said": said}
    totals = []  # no symbol for the marks: whole runs, N requests against 0
    for n in (requests, 0):
        whole = payload_file.parent / f"{variant}-{workload}-{n}.callgrind"
        part, dumps = _valgrind(payload_file, workload, n, whole, False, gc_threshold)
        totals.append(sum(total for _, total in dumps))
        said = part if n else said
    return {"instructions": totals[0] - totals[1], "empty": 0, "said": said}


def count_all(
    variants: list[str], requests: int, jobs: int, directory: Path, parts: bool = False
) -> dict[str, Any]:
    """Every variant's every workload (and the stage's parts, with ``parts``), ``jobs``
    children at once (counts do not depend on the machine's load)."""
    written = {v: _write_payloads(v, requests, directory) for v in variants}
    gc_threshold = ",".join(map(str, _serve_gc_threshold()))
    workloads = WORKLOADS + (PART_WORKLOADS if parts else ())
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        futures = {
            (v, w): pool.submit(count, v, w, requests, written[v][0], gc_threshold)
            for v in variants
            for w in workloads
        }
        counts = {key: future.result() for key, future in futures.items()}
    return {
        v: {
            "instructions": {w: counts[v, w]["instructions"] for w in workloads},
            "empty": {w: counts[v, w]["empty"] for w in workloads},
            "said": {w: counts[v, w]["said"] for w in workloads},
            "expected_mcp": written[v][1],
        }
        for v in variants
    }


def problems_of(variant: str, row: dict[str, Any]) -> list[str]:
    expected, said = row["expected_mcp"], row["said"]
    problems = []
    classifying = ("floor", "floor+product", "stage", *PART_WORKLOADS[1:])
    for name in (n for n in classifying if n in said):
        if said[name]["mcp_spans"] != expected:
            problems.append(f"{name} read {said[name]['mcp_spans']} MCP spans of {expected}")
    if said["naive"]["marked"] != expected:
        problems.append(f"the naive hop marked {said['naive']['marked']} MCP spans of {expected}")
    for name in ("stage", "floor+product"):
        if said[name]["duplicates"]:
            problems.append(f"{name} saw {said[name]['duplicates']} duplicates")
    product = said["floor+product"]
    if not 0 < product["decided_spans"] == product["call_spans"] - product["held_spans"]:
        problems.append(
            f"floor+product decided {product['decided_spans']} call spans of"
            f" {product['call_spans']} ({product['held_spans']} held)"
        )
    if said["stage"]["errors"]:
        problems.append(f"the stage had {said['stage']['errors']:.0f} analysis errors")
    problems += [f"the floor's output: {p}" for p in said["floor"]["problems"]]
    problems += [f"floor+product's output: {p}" for p in said["floor+product"]["problems"]]
    for name, value in row["instructions"].items():
        if value <= 0:
            problems.append(f"{name}: {value} instructions")
        if said[name]["threads"] != 1:
            problems.append(f"{name}: {said[name]['threads']} threads (others' work is counted)")
    for name, value in row["empty"].items():
        if value > MAX_EMPTY_INSTRUCTIONS:  # something ran that is not the work
            problems.append(f"{name}: {value:,} instructions counted for no request")
    return [f"{variant}: {p}" for p in problems]


def report(rows: dict[str, dict[str, Any]], requests: int) -> None:
    variants = list(rows)
    print(f"instructions (callgrind), {requests} fresh requests of 512 spans per payload")
    print(f"{'':40}" + "".join(f"{v:>16}" for v in variants))

    def line(label: str, cell: Callable[[dict[str, Any]], str]) -> None:
        print(label.ljust(40) + "".join(cell(rows[v]).rjust(16) for v in variants))

    def per(name: str, unit: Callable[[dict[str, Any]], int]) -> Callable[[dict[str, Any]], str]:
        return lambda r: f"{r['instructions'][name] / unit(r):,.0f}"

    line("MCP spans per request", lambda r: f"{r['expected_mcp'] / requests:.0f}")
    for name in WORKLOADS:
        line(f"{name}, per request", per(name, lambda r: requests))
    for name in WORKLOADS:
        line(f"{name}, per MCP span", per(name, lambda r: int(r["expected_mcp"])))

    def ratio(a: str, b: str) -> Callable[[dict[str, Any]], str]:
        return lambda r: f"{r['instructions'][a] / r['instructions'][b]:.2f}"

    if all("stage:read" in rows[v]["instructions"] for v in variants):
        print("the stage's parts, per MCP span (each row adds one part to the one above)")

        def part(name: str, before: str | None) -> Callable[[dict[str, Any]], str]:
            def cell(r: dict[str, Any]) -> str:
                counted = r["instructions"]
                spent = counted[name] - (counted[before] if before else 0)
                return f"{spent / int(r['expected_mcp']):,.0f}"

            return cell

        names = [*PART_WORKLOADS, "stage"]
        for index, name in enumerate(names):
            label = PART_NAMES[name.partition(":")[2] or "strip"]
            line(f"  {label}", part(name, names[index - 1] if index else None))
    line("stage / floor", ratio("stage", "floor"))
    line("floor+product / floor", ratio("floor+product", "floor"))
    line("stage / floor+product", ratio("stage", "floor+product"))
    line("stage / naive", ratio("stage", "naive"))
    line("floor / parse+serialize", ratio("floor", "parse+serialize"))
    line("naive / parse+serialize", ratio("naive", "parse+serialize"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=16, help="fresh requests counted")
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help=f"comma-separated, of {VARIANTS}"
    )
    parser.add_argument("--jobs", type=int, default=2, help="children under valgrind at once")
    parser.add_argument(
        "--parts", action="store_true", help="also count the stage a part at a time"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # the run under valgrind
    parser.add_argument("--workload", choices=WORKLOADS + PART_WORKLOADS, help=argparse.SUPPRESS)
    parser.add_argument("--gc-threshold", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        threshold = [int(t) for t in args.gc_threshold.split(",")]
        return _child(args.child, args.workload, args.requests, threshold)
    variants = [v for v in args.variants.split(",") if v]
    unknown = set(variants) - set(VARIANTS)
    if unknown or not variants or args.requests < 1:
        parser.error(f"--variants of {VARIANTS}, --requests at least 1")
    if shutil.which(VALGRIND) is None:
        raise SystemExit("valgrind is not installed (Debian/Ubuntu: apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="mcp-breaker-instructions-") as scratch:
        rows = count_all(variants, args.requests, args.jobs, Path(scratch), args.parts)
    report(rows, args.requests)
    problems = [p for v, row in rows.items() for p in problems_of(v, row)]
    if args.json:
        args.json.write_text(json.dumps({"requests": args.requests, "rows": rows}, indent=2))
    if problems:
        print("checks: FAILED\n" + "\n".join(f"  {p}" for p in problems))
        return 1
    print(
        "checks: ok (the floors and the stage read every MCP span classify.py counts, the naive"
        " hop marked them all, no duplicate, no analysis error, every call span of"
        " floor+product decided or held, the floors' output decodes with their annotations)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
