"""Bad input, compatibility with the original Lore, concurrent writers and git merges."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lore import capture
from lore.capture import WriteOptions
from lore.store import Store
from lore.store.audit import verify
from tests.conftest import HAND_FIXTURE, read_jsonl, resolve_locations
from tests.conftest import settings as lore_settings

DECISIONS = Path("journal/data/decisions.jsonl")
PATTERNS = Path("patterns/data/patterns.yaml")


# -- bad input ---------------------------------------------------------------------


def test_empty_text_is_a_usage_error(cli, initialised: Path) -> None:
    result = cli("remember", "   ")
    assert result.exit_code == 2
    assert result.stderr == "Error: decision is empty\nHint: give the decision as text\n"
    assert (initialised / DECISIONS).read_bytes() == b""


def test_huge_text_is_refused_with_size(cli, initialised: Path) -> None:
    result = cli("observe", "x" * (10 * 1024 * 1024))
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: observation is 10.0 MB; the limit is 64 KB\n")


def test_binary_text_is_refused(cli, initialised: Path) -> None:
    result = cli("observe", "abc\x00\x01\x02def")
    assert result.exit_code == 2
    assert result.stderr == "Error: observation looks like binary data (control characters)\n"


def test_non_utf8_argument_is_refused(initialised: Path) -> None:
    # A shell passes raw bytes; Python decodes them with surrogateescape.
    env = {**os.environ}
    result = subprocess.run(
        [sys.executable, "-m", "lore", "observe", os.fsdecode(b"caf\xe9 cr\xe8me")],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.startswith("Error: observation is not valid UTF-8")


def test_malformed_jsonl_line_warns_and_keeps_the_rest(cli, initialised: Path) -> None:
    path = initialised / DECISIONS
    path.write_bytes(
        b'{"id":"dec-00000001","timestamp":"2025-01-01T00:00:00Z","decision":"First","project":"p"}\n'
        b"garbage line\n"
        b'{"id":"dec-00000002","timestamp":"2025-01-02T00:00:00Z","decision":"Caf\xe9"}\n'
        b'{"id":"dec-00000003","timestamp":"2025-01-03T00:00:00Z","decision":"Third","project":"p"}\n'
    )
    result = cli("list", "--type", "decision")
    assert result.exit_code == 0
    assert [line.split()[0] for line in result.stdout.splitlines()] == ["dec-00000003", "dec-00000001"]
    assert f"Warning: {path}:2: invalid JSON" in result.stderr
    assert f"Warning: {path}:3: not valid UTF-8" in result.stderr


def test_never_rewrites_a_file_it_could_not_parse(cli, initialised: Path) -> None:
    path = initialised / DECISIONS
    original = (
        b'{"id":"dec-00000001","timestamp":"2025-01-01T00:00:00Z","decision":"First"}\n'
        b"{broken\n"
    )
    path.write_bytes(original)
    result = cli("retract", "dec-00000001", "--reason", "no longer true")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {path}:2: refusing to rewrite a file with an unparseable line")
    assert path.read_bytes() == original


def test_yaml_item_error_keeps_other_items_and_refuses_rewrite(cli, initialised: Path) -> None:
    path = initialised / PATTERNS
    text = (
        "# Pattern Learner Database\n"
        "patterns:\n"
        '  - id: "pat-1-aaaa"\n'
        '    name: "Good one"\n'
        '    solution: "Works"\n'
        '  - id: "pat-2-bbbb"\n'
        '    name: "Broken: [unclosed"\n'
        "    solution: : :\n"
        '  - id: "pat-3-cccc"\n'
        '    name: "Another good one"\n'
        "anti_patterns: []\n"
    )
    path.write_text(text)
    result = cli("list", "--type", "pattern")
    assert sorted(line.split()[0] for line in result.stdout.splitlines()) == ["pat-1-aaaa", "pat-3-cccc"]
    assert f"Warning: {path}:8: invalid YAML" in result.stderr
    refused = cli("learn", "New pattern", "--solution", "x")
    assert refused.exit_code == 1 and "refusing to rewrite a file that did not parse completely" in refused.stderr
    assert path.read_text() == text


def test_partial_last_line_from_a_crash_does_not_glue_records(cli, initialised: Path) -> None:
    path = initialised / "inbox/data/observations.jsonl"
    path.write_bytes(b'{"id":"obs-00000001","timestamp":"2025-01-01T00:00:00Z","content":"ok"}\n{"id":"obs-0000')
    assert cli("observe", "after the crash").exit_code == 0
    contents = [r.get("content") for r in (orjson.loads(x) for x in path.read_bytes().splitlines()[::2])]
    assert contents == ["ok", "after the crash"]
    listed = cli("list", "--type", "observation")
    assert listed.stdout.count("\n") == 2 and f"{path}:2: invalid JSON" in listed.stderr


# -- original Lore compatibility -----------------------------------------------------


def test_reads_the_original_bash_lore_data_dir(cli, bash_lore_copy: Path) -> None:
    result = cli("--data-dir", str(bash_lore_copy), "list", "--all", "--json")
    ids = {r["id"]: r for r in orjson.loads(result.stdout)}
    assert set(ids) == {
        "dec-575c7671", "dec-081e0fd6", "pat-1739102400-a1b2", "anti-1739102500-c3d4",
        "fail-c0c437df", "sig-9d7e7f6d", "session-20261122-002100-2ea3d7c2",
    }  # fmt: skip
    assert ids["session-20261122-002100-2ea3d7c2"]["project"] == "x2"
    show = cli("--data-dir", str(bash_lore_copy), "show", "dec-575c7671").stdout
    assert "  -> relates_to -> dec-081e0fd6 [decision] Adopt Postgres advisory locks for the job queue" in show
    assert cli("--data-dir", str(bash_lore_copy), "doctor").exit_code == 0


def test_rewrites_of_original_files_keep_every_field(cli, bash_lore_copy: Path) -> None:
    before_decisions = (bash_lore_copy / DECISIONS).read_bytes().splitlines()
    before_patterns = yaml.safe_load((bash_lore_copy / PATTERNS).read_text())
    before_graph = orjson.loads((bash_lore_copy / "graph/data/graph.json").read_bytes())
    d = ["--data-dir", str(bash_lore_copy)]
    assert cli(*d, "retract", "dec-575c7671", "--reason", "moved to SQLite").exit_code == 0
    assert cli(*d, "validate", "pat-1739102400-a1b2").exit_code == 0
    assert cli(*d, "learn", "Quote your variables", "--solution", 'Use "$var"').exit_code == 0
    assert cli(*d, "link", "dec-081e0fd6", "pat-1739102400-a1b2", "implements").exit_code == 0

    after = read_jsonl(bash_lore_copy / DECISIONS)
    original = orjson.loads(before_decisions[0])
    assert "status" not in original  # the original wrote no status; every field it wrote is kept
    assert {k: after[0][k] for k in original} == original
    assert after[0]["status"] == "retracted"
    assert after[0]["retracted_reason"] == "moved to SQLite"
    assert (bash_lore_copy / DECISIONS).read_bytes().splitlines()[1] == before_decisions[1]

    patterns = yaml.safe_load((bash_lore_copy / PATTERNS).read_text())
    validated = patterns["patterns"][0]
    assert {k: v for k, v in validated.items() if k not in ("validations", "confidence", "updated_at")} == {
        k: v for k, v in before_patterns["patterns"][0].items() if k not in ("validations", "confidence")
    }
    assert validated["updated_at"].endswith("Z")  # every edit is stamped: lore sync's "newest edit wins"
    assert validated["validations"] == 6
    assert patterns["anti_patterns"] == before_patterns["anti_patterns"]
    assert (bash_lore_copy / PATTERNS).read_text().startswith("# Pattern Learner Database\n")

    graph = orjson.loads((bash_lore_copy / "graph/data/graph.json").read_bytes())
    assert graph["edges"][0] == before_graph["edges"][0]
    for key, node in before_graph["nodes"].items():
        assert graph["nodes"][key] == node
    new_edge = graph["edges"][1]
    assert (new_edge["from"], new_edge["relation"]) == ("decision-70988e5a", "implements")  # reuses the original node


def test_a_new_pattern_is_appended_as_a_rewrite_would_write_it(cli, initialised: Path) -> None:
    """A file lore wrote gets the bytes a whole rewrite gives: the new item alone is emitted, after the list's last."""
    from lore.store.store import PATTERNS_HEADER, dump_yaml

    path = initialised / PATTERNS
    for name in ("Quote your variables", "Pin your tools", "Bound every queue"):
        assert cli("learn", name, "--solution", f"{name}:\n  the long way").exit_code == 0
        assert cli("learn", f"Not {name}", "--anti", "--symptom", "it hurts").exit_code == 0
        text = path.read_text()
        assert text == PATTERNS_HEADER + dump_yaml(yaml.safe_load(text))
    doc = yaml.safe_load(path.read_text())
    assert [p["name"] for p in doc["patterns"]] == ["Quote your variables", "Pin your tools", "Bound every queue"]
    assert len(doc["anti_patterns"]) == 3


def test_a_new_pattern_keeps_the_original_files_lines_and_comments(cli, bash_lore_copy: Path, tmp_path: Path) -> None:
    """The original bash Lore's own layout (double quotes), a comment between the lists and a file without a
    final newline: every line stays as it was, the new item goes after the list's last line."""
    path = bash_lore_copy / PATTERNS
    before = path.read_text().replace("anti_patterns:", "# kept as written\nanti_patterns:").rstrip("\n")
    path.write_text(before)
    d = ["--data-dir", str(bash_lore_copy)]
    assert cli(*d, "learn", "Quote your variables", "--solution", 'Use "$var"').exit_code == 0
    after = path.read_text()
    head, _, tail = before.partition("# kept as written\n")
    assert after.startswith(head) and after.endswith("# kept as written\n" + tail)
    doc = yaml.safe_load(after)
    assert [p["name"] for p in doc["patterns"]] == ["Safe bash arithmetic", "Quote your variables"]
    assert doc["anti_patterns"] == yaml.safe_load(before)["anti_patterns"]


@pytest.mark.parametrize("layout", ["indentless", "flow"])
def test_a_list_laid_out_otherwise_is_rewritten_whole(cli, initialised: Path, layout: str) -> None:
    """Where the new item cannot sit after the last one as the file lays its items out, the document is rewritten."""
    from lore.store.store import PATTERNS_HEADER, dump_yaml

    path = initialised / PATTERNS
    items = "- id: pat-1\n  name: Old one\n" if layout == "indentless" else "[{id: pat-1, name: Old one}]\n"
    path.write_text(f"{PATTERNS_HEADER}patterns:{' ' if layout == 'flow' else chr(10)}{items}anti_patterns: []\n")
    assert cli("learn", "New one", "--solution", "x").exit_code == 0
    text = path.read_text()
    assert text == PATTERNS_HEADER + dump_yaml(yaml.safe_load(text))
    assert [p["name"] for p in yaml.safe_load(text)["patterns"]] == ["Old one", "New one"]


def test_patterns_yaml_is_parsed_again_only_for_new_bytes_and_every_read_gets_its_own_objects(tmp_path: Path) -> None:
    from lore.store import readers

    path = tmp_path / "patterns.yaml"
    path.write_text("patterns:\n  - id: pat-1\n    name: One\nanti_patterns: []\n")
    first = readers.read_patterns_yaml(path)
    first.items[0][1]["name"] = "edited by a caller"
    first.extra["document"]["patterns"].append({"id": "pat-x"})
    again = readers.read_patterns_yaml(path)
    assert again.items[0][1]["name"] == "One" and len(again.extra["document"]["patterns"]) == 1
    path.write_text("patterns:\n  - id: pat-1\n    name: Two\nanti_patterns: []\n")  # another writer, same size
    assert readers.read_patterns_yaml(path).items[0][1]["name"] == "Two"
    path.write_text("patterns: [\n")
    broken = readers.read_patterns_yaml(path)
    assert not broken.complete and broken.warnings and readers.read_patterns_yaml(path).warnings == broken.warnings


def test_hand_written_original_fixture_round_trips(cli, tmp_path: Path) -> None:
    data = tmp_path / "hand"
    shutil.copytree(HAND_FIXTURE, data)
    d = ["--data-dir", str(data)]
    listed = {r["id"]: r for r in orjson.loads(cli(*d, "list", "--json").stdout)}
    assert len(listed) == 8
    session = listed["session-20250301-170000-deadbeef"]
    assert session["title"] == "Moved session storage spike to a branch; Postgres looks viable"
    resume = cli("--project", "webapp", *d, "resume").stdout
    assert "  - Benchmark session reads under load" in resume and "Related: dec-0a1b2c3d, dec-2c3d4e5f" in resume
    assert cli(*d, "supersede", "dec-0a1b2c3d", "dec-2c3d4e5f").exit_code == 0
    assert cli(*d, "retract", "obs-1234abcd", "--reason", "QA has its own DB now").exit_code == 0
    assert cli(*d, "learn", "x", "--anti", "--symptom", "y").exit_code == 0
    decision = {r["id"]: r for r in read_jsonl(data / DECISIONS)}["dec-0a1b2c3d"]
    assert decision["reviewer"] == "mkhan" and decision["x_custom"] == {"nested": [1, 2, 3]}
    assert read_jsonl(data / "inbox/data/observations.jsonl")[0]["mood"] == "grumpy"
    doc = yaml.safe_load((data / PATTERNS).read_text())
    assert doc["patterns"][0]["owner"] == "payments-team"
    assert doc["anti_patterns"][0]["ticket"] == "ENG-42"
    graph = orjson.loads((data / "graph/data/graph.json").read_bytes())
    assert graph["meta"] == {"written_by": "hand"}
    assert [e["relation"] for e in graph["edges"]] == ["contradicts", "derived_from", "supersedes"]


_json_scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=20)
_extra_fields = st.dictionaries(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=3, max_size=12).filter(
        lambda k: k not in {"id", "status", "retracted_reason", "status_changed_at", "decision", "timestamp"}
    ),
    st.recursive(_json_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6),
    max_size=5,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(extra=_extra_fields)
def test_unknown_fields_survive_a_rewrite(initialised: Path, extra: dict) -> None:
    record = {"id": "dec-12345678", "timestamp": "2025-01-01T00:00:00Z", "decision": "Keep it", **extra}
    path = initialised / DECISIONS
    path.write_bytes(orjson.dumps(record) + b"\n")
    store = Store(initialised, actor="test")
    from lore.capture import retract

    retract(store, "dec-12345678", "because")
    after = read_jsonl(path)[0]
    assert {k: after[k] for k in extra} == extra
    assert list(after)[: len(record)] == list(record)  # key order kept too


# -- concurrency and crash safety ----------------------------------------------------------

WRITER = r"""
import sys
from pathlib import Path
from lore.store import Store
from lore import capture
from lore.capture import WriteOptions

data_dir, worker = Path(sys.argv[1]), int(sys.argv[2])
store = Store(data_dir, actor=f"worker-{worker}")
plain = WriteOptions(check_duplicates=False)
for i in range(250):
    if i % 25 == 0:
        capture.learn(store, f"pattern {worker}-{i}", project="p", solution="s", options=plain)
    elif i % 5 == 0:
        capture.remember(store, f"decision {worker}-{i}", project="p", options=plain)
    else:
        capture.observe(store, f"observation {worker}-{i}", project="p", options=plain)
"""


@pytest.mark.slow
def test_eight_concurrent_writers_lose_nothing(initialised: Path, tmp_path: Path) -> None:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    procs = [
        subprocess.Popen([sys.executable, str(script), str(initialised), str(w)], env=env, stderr=subprocess.PIPE)
        for w in range(8)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err.decode()
    snapshot = Store(initialised).load()
    assert snapshot.warnings == []
    titles = {r.title for r in snapshot.records.values()}
    expected = set()
    for w in range(8):
        for i in range(250):
            kind = "pattern" if i % 25 == 0 else "decision" if i % 5 == 0 else "observation"
            expected.add(f"{kind} {w}-{i}")
    assert titles == expected
    assert len(snapshot.records) == 2000
    checked, problem = verify(initialised)
    assert (checked, problem) == (2000, None)


HOLDER = r"""
import sys, time
from pathlib import Path
from lore.store.fileio import data_lock
data_dir, held, release = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
with data_lock(data_dir):
    held.touch()
    while not release.exists():
        time.sleep(0.005)
"""


def test_the_data_lock_excludes_other_processes_and_threads_and_re_enters(initialised: Path, tmp_path: Path) -> None:
    import threading

    from lore.errors import LockTimeoutError
    from lore.store.fileio import data_lock

    script, held, release = tmp_path / "holder.py", tmp_path / "held", tmp_path / "release"
    script.write_text(HOLDER)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    holder = subprocess.Popen([sys.executable, str(script), str(initialised), str(held), str(release)], env=env)
    try:
        deadline = time.monotonic() + 60
        while not held.exists():
            assert time.monotonic() < deadline and holder.poll() is None
            time.sleep(0.01)
        with pytest.raises(LockTimeoutError), data_lock(initialised, timeout=0.1):
            pass  # another process holds it
    finally:
        release.touch()
        holder.wait(timeout=60)
    entered: list[str] = []
    with data_lock(initialised), data_lock(initialised):  # re-entrant in one thread
        thread = threading.Thread(target=lambda: _try_lock(initialised, entered))
        thread.start()
        thread.join()
        assert entered == ["timed out"]  # another thread of this process waits like another process
    thread = threading.Thread(target=lambda: _try_lock(initialised, entered))
    thread.start()
    thread.join()
    assert entered == ["timed out", "entered"]
    import filelock  # what lore locked the data dir with before (an older lore still running does)

    with filelock.FileLock(str(initialised / ".lore.lock")), pytest.raises(LockTimeoutError), data_lock(initialised, timeout=0.1):
        pass


def _try_lock(data_dir: Path, entered: list[str]) -> None:
    from lore.errors import LockTimeoutError
    from lore.store.fileio import data_lock

    try:
        with data_lock(data_dir, timeout=0.1):
            entered.append("entered")
    except LockTimeoutError:
        entered.append("timed out")


# A process that waits for the go file, then writes: through the CLI (which hands the write to
# a running helper) or straight through lore.capture (no helper), as argv[3] says.
RACER = r"""
import os, sys, time
from pathlib import Path
go, how, text = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
while not go.exists():
    time.sleep(0.001)
if how == "cli":
    os.execv(sys.executable, [sys.executable, "-P", "-m", "lore", "remember", text, "--rationale", "raced " + text])
from lore import capture
from lore.store import Store
capture.remember(Store(Path(os.environ["LORE_DATA_DIR"]), actor="direct"), text, project="p", rationale="raced " + text)
"""


@pytest.mark.slow
def test_writes_through_the_helper_and_direct_writes_at_the_same_moment_land_once_each(
    initialised: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lore.agent import client
    from lore.errors import DuplicateError
    from lore.index.manager import IndexManager

    store = Store(initialised, actor="test")
    for i in range(30):
        capture_plain(store, f"Adopt queue worker {i} for the billing jobs")
    locations = resolve_locations(initialised)
    IndexManager(locations).build()
    monkeypatch.delenv("LORE_SERVER")  # the autouse fixture turns the helper off
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    started = subprocess.run([sys.executable, "-P", "-m", "lore", "server", "start", "--idle", "120"], env=env,
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    assert started.returncode == 0, started.stderr
    try:
        deadline = time.monotonic() + 60
        while client.ask_server({"op": "ping"}, time.monotonic() + 1.0, locations.index_dir, lore_settings()) != "pong":
            assert time.monotonic() < deadline, "the helper did not answer a ping"
            time.sleep(0.05)
        script, go = tmp_path / "racer.py", tmp_path / "go"
        script.write_text(RACER)
        texts = {how: [f"Raced {how} write {i} about the zebra ledger {i * 7}" for i in range(4)] for how in ("cli", "direct")}
        procs = [subprocess.Popen([sys.executable, str(script), str(go), how, text], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE) for how, batch in texts.items() for text in batch]
        go.touch()
        for proc in procs:
            _, err = proc.communicate(timeout=240)
            assert proc.returncode == 0, err.decode()
        # The CLI's writes were the helper's (it counts each just after answering: poll).
        while (client.read_status(locations.index_dir, lore_settings()) or {}).get("writes") != len(texts["cli"]):
            assert time.monotonic() < deadline + 120, client.read_status(locations.index_dir, lore_settings())
            time.sleep(0.02)
        titles = [r.title for r in store.load().records.values()]
        for text in (*texts["cli"], *texts["direct"]):
            assert titles.count(text) == 1, text
        assert len(titles) == 30 + 8
        assert verify(initialised) == (38, None)
        # Each side's check saw the other's records: the same texts again are refused.
        for text in texts["direct"]:
            again = subprocess.run([sys.executable, "-P", "-m", "lore", "remember", text, "--rationale", "raced " + text],
                                   env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
            assert again.returncode == 3, again.stderr
        for text in texts["cli"]:
            with pytest.raises(DuplicateError):
                capture.remember(store, text, project="p", rationale="raced " + text)
    finally:
        subprocess.run([sys.executable, "-P", "-m", "lore", "server", "stop"], env=env, capture_output=True, timeout=120)


def capture_plain(store: Store, text: str) -> None:
    capture.remember(store, text, project="p", options=WriteOptions(check_duplicates=False))


# -- git merges of two clones ------------------------------------------------------------


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}  # fmt: skip
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("with_attributes", [True, False])
def test_two_clones_appending_merge_without_conflict(cli, tmp_path: Path, with_attributes: bool) -> None:
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    origin = tmp_path / "origin"
    cli("--data-dir", str(origin), "init", *(["--git"] if with_attributes else []))
    cli("--data-dir", str(origin), "remember", "Base decision about caching layers")
    _git(origin, "init", "-q", "-b", "main")
    _git(origin, "add", "-A")
    _git(origin, "commit", "-qm", "base")
    clone_a, clone_b = tmp_path / "a", tmp_path / "b"
    _git(tmp_path, "clone", "-q", str(origin), str(clone_a))
    _git(tmp_path, "clone", "-q", str(origin), str(clone_b))
    if with_attributes:
        # Each teammate's clone registers lore's merge driver (.git/config is not cloned).
        for clone in (clone_a, clone_b):
            assert "registered lore's merge driver" in cli("--data-dir", str(clone), "init", "--git").stdout
    cli("--data-dir", str(clone_a), "remember", "Alice chose Kafka for the event bus")
    cli("--data-dir", str(clone_b), "remember", "Bob moved CI to self-hosted runners")
    for clone in (clone_a, clone_b):
        _git(clone, "add", "-A")
        _git(clone, "commit", "-qm", f"from {clone.name}")
    assert _git(clone_a, "push", "-q", "origin", "HEAD:incoming").returncode == 0
    _git(clone_b, "fetch", "-q", "origin", "incoming")
    merged = _git(clone_b, "merge", "-q", "--no-edit", "FETCH_HEAD")
    if not with_attributes:
        # Without lore's driver both sides append after the same line: a real conflict.
        assert merged.returncode != 0
        return
    assert merged.returncode == 0, merged.stdout + merged.stderr
    titles = sorted(r["decision"] for r in read_jsonl(clone_b / DECISIONS))
    assert titles == ["Alice chose Kafka for the event bus", "Base decision about caching layers",
                      "Bob moved CI to self-hosted runners"]  # fmt: skip
    assert cli("--data-dir", str(clone_b), "list", "--type", "decision").stdout.count("\n") == 3
    assert cli("--data-dir", str(clone_b), "doctor").exit_code == 0


def test_an_atomic_write_told_not_to_make_its_directory_creates_nothing(tmp_path: Path) -> None:
    from lore.store.fileio import atomic_write

    gone = tmp_path / "gen-removed"
    with pytest.raises(FileNotFoundError):
        atomic_write(gone / "null-evidence-2.json", b"{}", make_parent=False)
    assert not gone.exists()
    atomic_write(gone / "kept.json", b"{}")  # the default still makes it
    assert (gone / "kept.json").read_bytes() == b"{}"
