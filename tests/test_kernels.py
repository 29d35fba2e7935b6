"""`scalecheck kernel`: Debian package names to releases, short names to fetched images,
and the cache it unpacks into. No network: the fetch itself runs in the project's set-up
(scripts/setup.d/25-kernels.sh) and tests/test_trace_kernels.py boots what it fetched."""

import json

import pytest

from scalecheck.common.errors import UserError
from scalecheck.run.linux import kernels

# As `apt-cache search --names-only ^linux-image-` lists them on Debian 12 (a sample).
PACKAGES = [
    "linux-image-6.1.0-55-amd64-unsigned",
    "linux-image-6.1.0-56-amd64-unsigned",
    "linux-image-6.1.0-56-rt-amd64-unsigned",
    "linux-image-6.1.0-56-cloud-amd64-unsigned",
    "linux-image-6.1.0-56-amd64",
    "linux-image-6.12.9+deb12-amd64-unsigned",
    "linux-image-6.12.115+deb12-amd64-unsigned",
    "linux-image-6.12.117+deb12-amd64-unsigned",
    "linux-image-6.12.117+deb12-cloud-amd64-unsigned",
    "linux-image-6.12.117+deb12-rt-amd64-unsigned",
    "linux-image-6.12.117+deb12-amd64-dbg",
    "linux-image-6.12-amd64-dbg",
]


def test_newest_package_of_a_series_and_flavour():
    newest = kernels.newest_package
    assert newest(PACKAGES, "6.12", "amd64") == "linux-image-6.12.117+deb12-amd64-unsigned"
    assert newest(PACKAGES, "6.12", "rt-amd64") == "linux-image-6.12.117+deb12-rt-amd64-unsigned"
    # 6.1 is not a prefix of 6.12; versions compare as numbers (56 > 55, 117 > 9).
    assert newest(PACKAGES, "6.1", "amd64") == "linux-image-6.1.0-56-amd64-unsigned"
    assert newest(PACKAGES, "6.13", "amd64") is None


def test_short_names():
    assert kernels.parse_short_name("6.12") == ("6.12", "amd64")
    assert kernels.parse_short_name("6.12-rt") == ("6.12", "rt-amd64")
    for bad in ("6", "6.12-cloud", "latest"):
        with pytest.raises(UserError):
            kernels.parse_short_name(bad)


def _fetched(root, release, series, flavour):
    directory = root / "scalecheck" / "kernels" / release
    directory.mkdir(parents=True)
    (directory / f"vmlinuz-{release}").write_bytes(b"image")
    info = {
        "release": release,
        "series": series,
        "flavour": flavour,
        "package": f"linux-image-{release}-unsigned",
        "version": "1",
        "package_bytes": 1,
        "image": f"vmlinuz-{release}",
        "image_bytes": 5,
    }
    (directory / "kernel.json").write_text(json.dumps(info))
    return directory / f"vmlinuz-{release}"


def test_kernel_option_resolves_fetched_releases_and_series(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    older = _fetched(tmp_path, "6.12.9+deb12-amd64", "6.12", "amd64")
    newer = _fetched(tmp_path, "6.12.117+deb12-amd64", "6.12", "amd64")
    rt = _fetched(tmp_path, "6.12.117+deb12-rt-amd64", "6.12", "rt-amd64")
    # A facts directory of a probed image (no kernel.json) is not a fetched kernel.
    (tmp_path / "scalecheck" / "kernels" / "0123456789abcdef").mkdir()
    assert [k["release"] for k in kernels.fetched()] == [
        "6.12.117+deb12-rt-amd64",
        "6.12.117+deb12-amd64",
        "6.12.9+deb12-amd64",
    ]
    assert kernels.resolve("6.12") == newer
    assert kernels.resolve("6.12-rt") == rt
    assert kernels.resolve("6.12.9+deb12-amd64") == older
    assert kernels.resolve(str(older)) == older
    with pytest.raises(UserError, match=r"kernel fetch 6\.1`"):
        kernels.resolve("6.1")
    with pytest.raises(UserError, match="neither an image file nor a fetched kernel"):
        kernels.resolve("no-such-kernel")


def test_fetch_of_a_series_apt_does_not_know_is_one_clear_error(tmp_path, monkeypatch):
    """A fake apt-cache (a shell script on PATH) lists packages without 6.13."""
    fake = tmp_path / "bin" / "apt-cache"
    fake.parent.mkdir()
    listing = "".join(f"{name} - Linux\n" for name in PACKAGES)
    fake.write_text(f"#!/bin/sh\ncat <<'END'\n{listing}END\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(UserError, match=r"apt knows no linux-image-6\.13\."):
        kernels.fetch("6.13", log=lambda *a: None)
    assert not (tmp_path / "cache" / "scalecheck" / "kernels").exists()


def test_kernel_list_prints_the_fetched_kernels(tmp_path, monkeypatch, capsys):
    from scalecheck.cli import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert main(["kernel", "list"]) == 0
    assert "no kernels fetched" in capsys.readouterr().err
    image = _fetched(tmp_path, "6.12.117+deb12-amd64", "6.12", "amd64")
    assert main(["kernel", "list", "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert listed["path"] == str(image) and listed["package_bytes"] == 1
    assert main(["kernel", "list"]) == 0
    assert "6.12.117+deb12-amd64" in capsys.readouterr().out
