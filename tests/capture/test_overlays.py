"""Overlay mounts' layers and the real path of a file below one (spyglass/capture/overlays.py).
The mount itself is played for real, under both backends, in tests/witness/test_secret_through_overlay.py."""

from __future__ import annotations

from pathlib import Path

from spyglass.capture.overlays import Overlays, layers
from spyglass.events.schema import Event


def test_layers_upper_first_then_the_lower_ones_relative_to_the_mounters_directory() -> None:
    assert layers("lowerdir=/a:b/c,upperdir=/u,workdir=/w", "/home/x") == ["/u", "/a", "/home/x/b/c"]
    assert layers("lowerdir=/with\\:colon:/two,index=off", "/") == ["/with:colon", "/two"]
    assert layers("lowerdir=/a\\,b:/c,upperdir=/u\\,v", "/") == ["/u,v", "/a,b", "/c"]
    assert layers("mode=755,size=1m", "/") == []  # a tmpfs: no overlay
    assert layers("", "/") == []


def test_a_file_below_an_overlay_gets_the_path_in_the_layer_that_holds_it(tmp_path: Path) -> None:
    upper, lower1, lower2 = (tmp_path / n for n in ("upper", "lower1", "lower2"))
    for d in (upper, lower1 / "sub", lower2):
        d.mkdir(parents=True)
    (lower1 / "sub" / "key").write_text("k")
    (lower2 / "key").write_text("shadowed by nothing")
    (upper / "new").write_text("n")
    (lower2 / "new").write_text("hidden by the upper layer")
    ov = Overlays()
    assert not ov
    ov.mounted("/mnt/o", f"lowerdir={lower1}:{lower2},upperdir={upper},workdir={tmp_path / 'w'}", "/")
    assert ov.real("/mnt/o/sub/key") == f"{lower1}/sub/key"
    assert ov.real("/mnt/o/key") == f"{lower2}/key"
    assert ov.real("/mnt/o/new") == f"{upper}/new"
    assert ov.real("/mnt/o/missing") is None and ov.real("/mnt/other") is None and ov.real("/mnt/oo/key") is None
    events = [Event(type="file.read", path="/mnt/o/sub/key"), Event(type="sys.sensitive", path="/mnt/o/key"),
              Event(type="file.read", path="/elsewhere")]
    ov.apply(events)
    assert [(e.path, e.raw_path) for e in events] == [
        (f"{lower1}/sub/key", "/mnt/o/sub/key"), ("/mnt/o/key", None), ("/elsewhere", None)]
    ov.unmounted("/mnt/o")
    assert not ov and ov.real("/mnt/o/sub/key") is None


def test_another_mount_over_an_overlay_ends_it(tmp_path: Path) -> None:
    ov = Overlays()
    ov.mounted("/mnt/o", f"lowerdir={tmp_path}", "/")
    ov.mounted("/mnt/o", "mode=755", "/")  # a tmpfs mounted over it
    assert not ov


def test_an_overlay_made_with_the_new_mount_api_is_followed_call_by_call(tmp_path: Path) -> None:
    lower, upper, other = tmp_path / "lower", tmp_path / "upper", tmp_path / "other"
    for d in (lower, upper, other):
        d.mkdir()
    (lower / "key").write_text("k")
    (other / "more").write_text("m")
    ov = Overlays()
    ov.fs_opened(7, 3, "tmpfs")
    ov.fs_configured(7, 3, "lowerdir", str(lower), "/")  # no overlay's context: nothing
    ov.fs_opened(7, 3, "overlay")
    ov.fs_configured(7, 3, "lowerdir", "lower", str(tmp_path))  # relative to the caller's directory
    ov.fs_configured(7, 3, "lowerdir+", str(other), "/")
    ov.fs_configured(7, 3, "upperdir", str(upper), "/")
    ov.fs_configured(7, 3, "workdir", str(tmp_path / "w"), "/")
    ov.fs_mounted(7, 3, 4)
    assert not ov  # a detached mount: nothing below a mount point yet
    ov.forked(7, 8)
    ov.moved(8, 4, None, "/mnt/o")  # the child places it
    assert ov.mounts == {"/mnt/o": [str(upper), str(lower), str(other)]}
    assert ov.real("/mnt/o/key") == f"{lower}/key" and ov.real("/mnt/o/more") == f"{other}/more"
    ov.moved(8, -100, "/mnt/o", "/mnt/p")  # moved on from its mount point
    assert list(ov.mounts) == ["/mnt/p"]
    ov.moved(9, 5, None, "/mnt/q")  # a mount descriptor passed in: taken to be the last overlay made
    assert ov.real("/mnt/q/key") == f"{lower}/key"
    ov.tree_opened(7, 4, None)  # the descriptor number reused for a bind mount's tree
    ov.moved(7, 4, None, "/mnt/p")  # ...moved over the overlay: no overlay there any more
    assert ov.real("/mnt/p/key") is None


def test_a_path_below_a_detached_mount_is_looked_up_in_its_directories(tmp_path: Path) -> None:
    lower, src = tmp_path / "lower", tmp_path / "src"
    for d in (lower / "sub", src):
        d.mkdir(parents=True)
    (lower / "key").write_text("k")
    ov = Overlays()
    ov.fs_opened(7, 3, "overlay")
    ov.fs_configured(7, 3, "lowerdir", str(lower), "/")
    ov.fs_mounted(7, 3, 4)
    ov.tree_opened(7, 5, str(src))  # a detached copy of src
    ov.tree_opened(7, 6, None)  # open_tree without a copy: the kernel names its files
    assert ov.below(7, 4, "key") == f"{lower}/key"
    assert ov.below(7, 4, "../../key") == f"{lower}/key"  # '..' stops at the mount's root
    assert ov.below(7, 4, "sub/new") == f"{lower}/sub/new"
    assert ov.below(7, 4, "") == str(lower)
    assert ov.below(7, 4, "/etc/passwd") is None and ov.below(8, 4, "key") is None
    assert ov.below(7, 5, "id_rsa") == f"{src}/id_rsa" and ov.below(7, 6, "x") is None
    ov.forked(7, 9)
    assert ov.below(9, 5, "id_rsa") == f"{src}/id_rsa"


def test_a_path_through_a_detached_mounts_descriptor_is_looked_up_in_its_directories(tmp_path: Path) -> None:
    ov = Overlays()
    ov.tree_opened(7, 5, str(tmp_path))
    assert ov.through_fd(7, "/proc/self/fd/5/id_rsa") == f"{tmp_path}/id_rsa"
    assert ov.through_fd(7, "/dev/fd/5/a/b") == f"{tmp_path}/a/b"
    assert ov.through_fd(8, "/proc/7/task/7/fd/5/x") == f"{tmp_path}/x"  # another process's descriptor
    assert ov.through_fd(7, "/proc/self/fd/5") == str(tmp_path)
    assert ov.through_fd(7, "/proc/self/fd/6/x") is None and ov.through_fd(7, "/etc/passwd") is None


def test_a_pid_reused_by_a_child_inherits_its_parents_descriptors_only(tmp_path: Path) -> None:
    ov = Overlays()
    ov.tree_opened(7, 5, str(tmp_path))  # pid 7 exits later; its pid is reused below
    ov.tree_opened(3, 6, str(tmp_path / "sub"))
    ov.forked(3, 7)
    assert ov.below(7, 5, "x") is None and ov.below(7, 6, "x") == f"{tmp_path}/sub/x"
