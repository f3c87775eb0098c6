"""What ships with a release, without building anything: the citation metadata
agrees with the package, the report link fills the form it opens, the release files' names."""
from __future__ import annotations

import pathlib
import tomllib
from urllib.parse import parse_qs, urlparse

import yaml

import site_report
from site_pages import config

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_citation_agrees_with_the_package_and_the_repository():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    # CFF 1.2.0's required keys (https://github.com/citation-file-format/citation-file-format/blob/main/schema.json)
    assert cff["cff-version"] == "1.2.0"
    assert cff["message"] and cff["title"] and cff["authors"] and all(
        a.get("name") or a.get("family-names") for a in cff["authors"])
    assert str(cff["version"]) == project["version"], "CITATION.cff's version must follow pyproject.toml"
    assert cff["repository-code"] == config()["repository"]["url"].rstrip("/")
    assert set(cff["license"]) == {"MIT", "CC-BY-SA-4.0"}
    assert project["license"] == "MIT"


def test_licence_files_name_each_other():
    code = (ROOT / "LICENSE").read_text(encoding="utf-8")
    content = (ROOT / "LICENSE-CONTENT.md").read_text(encoding="utf-8")
    assert code.startswith("MIT License") and "LICENSE-CONTENT.md" in code
    assert "creativecommons.org/licenses/by-sa/4.0" in content and "`LICENSE`" in content


def test_report_link_prefills_the_form_it_opens():
    repo = config()["repository"]["url"]
    title = "7. 最终 Linear W^O（六步中的第 6 步）"
    page = site_report.site_url(repo) + "book/07_output_linear.html"
    url = urlparse(site_report.issue_url(repo, title, page))
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert f"{url.scheme}://{url.netloc}{url.path}" == repo.rstrip("/") + "/issues/new"
    assert title in query["title"] and title in query["page"] and page in query["page"]
    # GitHub fills a form field by its id: the template and the field must exist
    form = yaml.safe_load((ROOT / ".github" / "ISSUE_TEMPLATE" / query["template"]).read_text(encoding="utf-8"))
    ids = {field.get("id") for field in form["body"]}
    assert "page" in ids
    assert set(query) - {"template", "title", "labels"} <= ids, "a prefilled parameter names no field of the form"


def test_release_files_carry_the_version():
    version = site_report.version()
    files = site_report.names(version)
    assert all(version in files[k] for k in ("pdf", "site", "notebooks"))
    assert len({files[k] for k in ("pdf", "site", "notebooks")}) == 3


def test_release_workflow_attaches_what_the_site_links():
    """The footer links releases/latest/download/<stable name>: the release must attach each one."""
    workflow = (ROOT / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8")
    steps = yaml.safe_load(workflow)["jobs"]["release"]["steps"]
    script = "\n".join(s.get("run", "") for s in steps)
    for stable in site_report.names("X")["latest"].values():
        assert f" {stable}\n" in script, f"release.yml does not attach {stable}"
    assert "make pdf" in script and "make bundle" in script and "gh release upload" in script
