"""Re-create the precision corpus under bench/corpus/precision/ (gitignored) from pinned PyPI sdists.

    python bench/precision/fetch_corpus.py              # every project in corpus.yaml
    python bench/precision/fetch_corpus.py fschat dspy  # only these
    options: --dest DIR (default bench/corpus/precision)  --force (re-extract)

Each project of corpus.yaml is downloaded with pip (`pip download --no-deps --no-binary :all: NAME==VERSION`,
the registry's ordinary client), its sha256 checked against corpus.yaml (a mismatch stops with exit 2:
the labels are only valid for those exact bytes), and extracted to DEST/<name>/ (the sdist's top folder
renamed to the project's name, so label paths do not carry the version). Downloads are kept in
DEST/_sdists/ and reused when their hash still matches. A project with `source: github` (none yet) is not
downloadable here: corpus.yaml says how to re-create it (owner/repo and commit).
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from corpus import DEFAULT_DEST, Project, load_corpus


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cached_sdist(project: Project, sdists: Path) -> Path | None:
    """The already-downloaded sdist of `project` whose hash matches, if any."""
    for candidate in sdists.glob(f"{project.sdist_stem}*"):
        if candidate.is_file() and sha256_of(candidate) == project.sha256:
            return candidate
    return None


def download(project: Project, sdists: Path) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
            "--dest", tmp, f"{project.package}=={project.version}",
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        files = [path for path in Path(tmp).iterdir() if path.is_file()]
        if result.returncode != 0 or len(files) != 1:
            raise SystemExit(
                f"{project.name}: `{' '.join(command[2:])}` failed (exit {result.returncode}):\n"
                f"{result.stderr.strip()[-2000:]}"
            )
        target = sdists / files[0].name
        shutil.move(str(files[0]), target)
        return target


def extract(archive: Path, dest: Path) -> None:
    """Extract the sdist's single top folder as `dest`."""
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as bundle:
                bundle.extractall(tmp)
        else:
            with tarfile.open(archive) as bundle:
                if hasattr(tarfile, "data_filter"):
                    bundle.extractall(tmp, filter="data")
                else:  # Python < 3.11.4: the sdists are pinned by hash, so their members are known
                    bundle.extractall(tmp)
        tops = list(Path(tmp).iterdir())
        if len(tops) != 1 or not tops[0].is_dir():
            raise SystemExit(f"{archive.name}: expected one top-level folder, found {len(tops)} entries")
        if dest.exists():
            shutil.rmtree(dest)
        tops[0].rename(dest)


def fetch(project: Project, dest_root: Path, force: bool) -> str:
    dest = dest_root / project.name
    marker = dest / ".llmdoctor-precision-sha256"
    if not force and marker.is_file() and marker.read_text().strip() == project.sha256:
        return "present"
    sdists = dest_root / "_sdists"
    sdists.mkdir(parents=True, exist_ok=True)
    archive = cached_sdist(project, sdists)
    how = "cached sdist"
    if archive is None:
        archive = download(project, sdists)
        how = "downloaded"
        actual = sha256_of(archive)
        if actual != project.sha256:
            archive.unlink()
            raise SystemExit(
                f"{project.name}: sha256 of {archive.name} is {actual}, corpus.yaml pins {project.sha256}; "
                "the labels hold only for the pinned file (exit 2)"
            )
    extract(archive, dest)
    marker.write_text(project.sha256 + "\n")
    return how


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("projects", nargs="*", help="project names from corpus.yaml (default: all)")
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST)
    parser.add_argument("--force", action="store_true", help="re-extract even when present")
    args = parser.parse_args(argv)
    corpus = load_corpus()
    wanted = corpus.select(args.projects)
    args.dest.mkdir(parents=True, exist_ok=True)
    for project in wanted:
        if project.source != "pypi":
            print(f"{project.name}: source {project.source}: re-create by hand as corpus.yaml says "
                  f"({project.how_to_get})")
            continue
        try:
            how = fetch(project, args.dest, args.force)
        except SystemExit as error:
            print(error, file=sys.stderr)
            return 2
        print(f"{project.name} {project.version}: {how} -> {args.dest / project.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
