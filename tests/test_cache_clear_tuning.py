"""`tilelang cache clear` also removes the autotuner's stored results, without following links,
and keeps plain files it did not write."""

from __future__ import annotations

import os

from tilelang_core.cache.store import get_cache


def test_clear_removes_tuning_records_and_never_follows_links(tmp_path):
    root = tmp_path / "cache"
    cache = get_cache(root)
    cache.disk.prepare()
    key = "ab" + "0" * 62
    shard = root / "autotune" / "ab"
    shard.mkdir(parents=True, mode=0o700)
    (shard / f"{key}.json").write_text("{}")
    outside = tmp_path / "user-data"
    outside.mkdir()
    (outside / "keep.txt").write_text("precious")
    os.symlink(outside, shard / "link-to-user-data")
    os.symlink(outside, root / "autotune" / "cd")
    (shard / "notes.txt").write_text("the user's")  # a plain file the cache never writes there

    report = cache.clear_report()

    assert report["tuning_records"] == 1
    assert not (shard / f"{key}.json").exists()
    assert not os.path.lexists(shard / "link-to-user-data")
    assert not os.path.lexists(root / "autotune" / "cd")
    assert (outside / "keep.txt").read_text() == "precious"
    assert str(shard / "link-to-user-data") in report["removed_junk"]
    assert (shard / "notes.txt").read_text() == "the user's" and report["kept"] == [str(shard / "notes.txt")]
