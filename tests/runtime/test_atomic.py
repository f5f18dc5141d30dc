"""Saves are all or nothing: killed at any point, the files on disk still load as one pair."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from dy2stat.runtime import atomic
from dy2stat.runtime import serialize as S
from dy2stat.runtime.serialize import FormatError
from tests.runtime import programs as P

ROOT = Path(__file__).parents[2]
FEED, FETCH = ["x"], ["y"]


def generation(k: int):
    """Save number ``k``: a program whose seed is ``k`` and parameters all equal to ``k``."""
    program, params = P.mlp()
    program.random_seed = k
    return program, {n: np.full_like(v, k) for n, v in params.items()}


def loaded_generation(prefix) -> int:
    """The generation the files hold, checking that program and parameters agree."""
    program, _, _, params = S.load_model(prefix)
    values = {float(v.ravel()[0]) for v in params.values()}
    assert values == {float(program.random_seed)}, (program.random_seed, values)
    return program.random_seed


def leftovers(folder) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.startswith("."))


# A process that saves generation after generation until it is killed; its parent
# (this helper) checks what is on disk after each kill, and reports. Each child
# kills itself (SIGKILL) at a random one of the file-system calls a save makes --
# creating, flushing, renaming, removing a file -- so that the kills land in every
# step of a save, the same ones on every run.
KILLER = textwrap.dedent("""
    import json, os, random, signal, sys
    from tests.runtime.test_atomic import generation, loaded_generation, leftovers
    from dy2stat.runtime import serialize as S

    folder, kills = sys.argv[1], int(sys.argv[2])
    prefix = os.path.join(folder, "net")
    S.save_model(prefix, *generation(0)[:1], ["x"], ["y"], generation(0)[1])
    rng = random.Random(17)
    results, done = [], 0
    for kill in range(kills):
        first, kill_at = done + 1, rng.randint(1, 40)
        pid = os.fork()
        if pid == 0:
            calls = 0

            def hooked(call):
                def hook(*args, **kwargs):
                    global calls
                    calls += 1
                    if calls == kill_at:
                        os.kill(os.getpid(), signal.SIGKILL)
                    return call(*args, **kwargs)
                return hook

            for name in ("open", "fsync", "replace", "unlink", "listdir"):
                setattr(os, name, hooked(getattr(os, name)))
            k = first
            while True:
                program, params = generation(k)
                S.save_model(prefix, program, ["x"], ["y"], params)
                k += 1
        os.waitpid(pid, 0)
        stray = leftovers(folder)
        recorded = json.load(open(prefix + ".json"))["params_sha256"]
        main_matches = S.atomic.digest(open(prefix + ".safetensors", "rb").read()) == recorded
        try:
            done = loaded_generation(prefix)
            error = None
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        results.append({"generation": done, "first": first, "leftovers": stray,
                        "rolled_forward": not main_matches, "error": error})
    print(json.dumps(results))
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_save_killed_at_random_points_leaves_a_loadable_consistent_pair(tmp_path):
    result = subprocess.run([sys.executable, "-c", KILLER, str(tmp_path), "50"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    results = json.loads(result.stdout)
    assert len(results) == 50
    for r in results:
        assert r["error"] is None, r
        # the previous save (generation first - 1) or a newer complete one, never a mix
        assert r["generation"] >= r["first"] - 1, r
        assert all(n.endswith((".tmp", ".pending")) for n in r["leftovers"]), r
    # kills landed before the commit, between the commit and the last rename, and after
    assert any(r["rolled_forward"] for r in results)
    assert any(r["generation"] == r["first"] - 1 for r in results)
    assert any(r["generation"] >= r["first"] for r in results)
    # the next save completes and cleans up what the killed ones left
    S.save_model(tmp_path / "net", *generation(1000)[:1], FEED, FETCH, generation(1000)[1])
    assert loaded_generation(tmp_path / "net") == 1000
    assert leftovers(tmp_path) == []


def test_a_save_interrupted_after_its_commit_loads_the_new_pair(tmp_path, monkeypatch):
    prefix = tmp_path / "net"
    S.save_model(prefix, *generation(1)[:1], FEED, FETCH, generation(1)[1])
    replace = os.replace

    def crash_on_the_last_rename(src, dst):
        if str(src).endswith(".pending"):
            raise KeyboardInterrupt  # the process stops here
        replace(src, dst)

    monkeypatch.setattr(os, "replace", crash_on_the_last_rename)
    with pytest.raises(KeyboardInterrupt):
        S.save_model(prefix, *generation(2)[:1], FEED, FETCH, generation(2)[1])
    monkeypatch.setattr(os, "replace", replace)
    assert [n.endswith(".pending") for n in leftovers(tmp_path)] == [True]
    assert loaded_generation(prefix) == 2  # the program is committed: its parameters wait
    S.save_model(prefix, *generation(3)[:1], FEED, FETCH, generation(3)[1])
    assert loaded_generation(prefix) == 3 and leftovers(tmp_path) == []


def test_a_save_interrupted_before_its_commit_leaves_the_previous_one(tmp_path, monkeypatch):
    prefix = tmp_path / "net"
    S.save_model(prefix, *generation(1)[:1], FEED, FETCH, generation(1)[1])
    replace = os.replace

    def crash_on_the_commit(src, dst):
        if str(dst).endswith(".json"):
            raise KeyboardInterrupt
        replace(src, dst)

    monkeypatch.setattr(os, "replace", crash_on_the_commit)
    with pytest.raises(KeyboardInterrupt):
        S.save_model(prefix, *generation(2)[:1], FEED, FETCH, generation(2)[1])
    monkeypatch.setattr(os, "replace", replace)
    assert loaded_generation(prefix) == 1
    assert all(n.endswith(".pending") for n in leftovers(tmp_path))  # its temporary is gone


def test_a_program_and_parameters_from_different_saves_are_refused(tmp_path):
    for k, name in ((1, "a"), (2, "b")):
        S.save_model(tmp_path / name, *generation(k)[:1], FEED, FETCH, generation(k)[1])
    os.replace(tmp_path / "b.safetensors", tmp_path / "a.safetensors")
    with pytest.raises(FormatError) as info:
        S.load_model(tmp_path / "a")
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'a'}.safetensors: not the parameters saved with "
                              f"{tmp_path / 'a'}.json"), message
    assert "different saves" in message and "SHA-256" in message


def test_the_program_records_the_digest_of_its_parameters(tmp_path):
    S.save_model(tmp_path / "net", *generation(1)[:1], FEED, FETCH, generation(1)[1])
    doc = json.loads((tmp_path / "net.json").read_text())
    assert doc["params_sha256"] == atomic.digest((tmp_path / "net.safetensors").read_bytes())


@pytest.mark.parametrize("bad", ["abc", "A" * 64, 7, None])
def test_a_malformed_digest_is_refused(bad):
    program, _ = generation(1)
    doc = S.program_to_dict(program, FEED, FETCH, params_sha256="0" * 64)
    doc["params_sha256"] = bad
    if bad is None:
        S.program_from_dict(doc)  # null: no digest recorded
        return
    with pytest.raises(FormatError, match="params_sha256: expected 64 lowercase hex digits"):
        S.program_from_dict(doc, "m.json")


def test_a_version_1_program_has_no_digest(tmp_path):
    program, _ = generation(1)
    doc = S.program_to_dict(program, FEED, FETCH, params_sha256="0" * 64)
    doc["version"] = 1
    with pytest.raises(FormatError, match="params_sha256: the field is new in version 2"):
        S.program_from_dict(doc, "m.json")


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_files_get_the_permissions_the_umask_gives(tmp_path, umask):
    old = os.umask(umask)
    try:
        S.save_model(tmp_path / "net", *generation(1)[:1], FEED, FETCH, generation(1)[1])
        S.save_program(tmp_path / "alone.json", generation(1)[0], FEED, FETCH)
    finally:
        os.umask(old)
    for name in ("net.json", "net.safetensors", "alone.json"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o666 & ~umask, name


def test_a_failed_write_leaves_no_temporary(tmp_path, monkeypatch):
    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        atomic.write(tmp_path / "f.json", b"{}")
    assert os.listdir(tmp_path) == []


def test_leftovers_of_other_files_are_kept(tmp_path):
    for name in (".net.json.abc123.tmp", ".net.v2.json.abc123.tmp", ".netx.json.ab.tmp",
                 ".net.json.notes"):
        (tmp_path / name).write_text("")
    atomic.write(tmp_path / "net.json", b"{}")
    assert leftovers(tmp_path) == [".net.json.notes", ".net.v2.json.abc123.tmp",
                                   ".netx.json.ab.tmp"]
