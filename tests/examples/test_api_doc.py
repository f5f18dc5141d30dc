"""docs/api.md is the API reference generated from the code: regenerating it gives the
same page, and every public name it covers has a docstring."""

from __future__ import annotations

import importlib.util
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _generator():
    spec = importlib.util.spec_from_file_location("api_reference", DOCS / "api_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


api_reference = _generator()


def test_api_md_is_what_the_generator_writes():
    assert (DOCS / "api.md").read_text() == api_reference.render(), (
        "docs/api.md is out of date: run `python docs/api_reference.py`")


def test_every_public_name_has_a_docstring():
    assert api_reference.missing_docstrings() == []


def test_every_public_name_is_on_the_page():
    text = (DOCS / "api.md").read_text()
    listing, homes, _ = api_reference.collect()
    for ns, entries in listing.items():
        for name, obj in entries:
            where, home_name = homes[id(obj)]
            assert f"`{where}.{home_name}" in text, f"{ns}.{name}"
            if (where, home_name) != (ns, name):
                assert f"`{name}` (`{where}.{home_name}`)" in text, f"{ns}.{name}"


def test_an_undocumented_name_is_reported_and_changes_the_page(monkeypatch):
    from dy2stat.vision import models

    def undocumented(x):
        return x

    class Documented:
        """A class whose method is not."""

        def method(self):
            return None

    monkeypatch.setattr(models, "undocumented", undocumented, raising=False)
    monkeypatch.setattr(models, "Documented", Documented, raising=False)
    monkeypatch.setattr(models, "__all__", [*models.__all__, "undocumented", "Documented"])
    Documented.__module__ = undocumented.__module__ = "dy2stat.vision.models.extra"
    assert api_reference.missing_docstrings() == [
        "dy2stat.vision.models.Documented.method", "dy2stat.vision.models.undocumented"]
    page = api_reference.render()
    assert "### `dy2stat.vision.models.undocumented(x)`" in page
    assert page != (DOCS / "api.md").read_text()
