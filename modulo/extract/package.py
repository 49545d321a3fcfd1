"""The installable plugin package of the admitted critics.

Layout (``OUT`` is ``modulo critics extract --out``)::

    OUT/pyproject.toml                    entry points in modulo.critics, one per admitted critic
    OUT/README.md
    OUT/<module>/__init__.py
    OUT/<module>/extracted.py             extracted_critic(...) per critic: importing it runs no model code
    OUT/<module>/code/<constraint>.py     the admitted code, as the model wrote it
    OUT/<module>/gate/<constraint>.json   the gate report (and .md) the critic was admitted with

Every critic is ``source="llm-extracted"`` and ``untrusted``: it always runs in the sandbox.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path

from .loop import ConstraintResult, identifier
from .report import write_gate_report, write_text


def package_names(benchmark: str, prefix: str) -> tuple[str, str]:
    """(distribution name, module name) of the package for ``benchmark``'s critics named ``prefix/...``."""
    slug = re.sub(r"[^a-z0-9]+", "-", f"modulo-{prefix}-{benchmark}".lower()).strip("-")
    return slug, slug.replace("-", "_")


def write_package(out: Path, benchmark: str, prefix: str, admitted: Sequence[ConstraintResult]) -> Path:
    """Write the plugin package of ``admitted`` critics into ``out``; returns ``out``."""
    dist, module = package_names(benchmark, prefix)
    pkg = out / module
    (pkg / "code").mkdir(parents=True, exist_ok=True)
    doc = f"LLM-extracted critics for {benchmark} (written by modulo critics extract)."
    write_text(pkg / "__init__.py", f'"""{doc}"""\n')
    entries = []
    blocks = []
    for r in admitted:
        stem = identifier(r.info.name)
        code = write_text(pkg / "code" / f"{stem}.py", r.code)
        write_gate_report(r, pkg / "gate")
        final = r.final
        assert final is not None and final.training is not None and final.held_out is not None
        provenance = {
            "reference": r.info.reference,
            "backend": r.backend,
            "model": r.model,
            "attempts": len(r.attempts),
            "gate_report": f"gate/{stem}.json",
            "min_recall": r.settings.min_recall,
            "recall_training": final.training.confusion.recall,
            "recall_held_out": final.held_out.confusion.recall,
            "package": dist,
            #: the admitted code as written (checked on load: an edited file is refused)
            "code_sha256": hashlib.sha256(code.read_bytes()).hexdigest(),
        }
        entries.append(f'"{r.critic}" = "{module}.extracted:{stem}"')
        blocks.append(
            f"{stem} = extracted_critic(\n"
            f"    {r.critic!r},\n"
            f"    constraint={r.info.name!r},\n"
            f"    benchmark={benchmark!r},\n"
            f"    description={r.info.description!r},\n"
            f'    code=_HERE / "code" / "{stem}.py",\n'
            f"    provenance={dict(sorted(provenance.items()))!r},\n"
            ")\n"
        )
    write_text(
        pkg / "extracted.py",
        f'"""LLM-extracted critics for {benchmark}, each admitted by modulo\'s extraction gate (see gate/).\n\n'
        "Importing this module runs none of the model's code: each critic loads its code file on its first\n"
        'check, inside a sandbox worker (the critics are untrusted)."""\n\n'
        "from pathlib import Path\n\n"
        "from modulo.extract.runtime import extracted_critic\n\n"
        "_HERE = Path(__file__).resolve().parent\n\n" + "\n".join(blocks),
    )
    write_text(
        out / "pyproject.toml",
        "[build-system]\n"
        'requires = ["hatchling>=1.21"]\n'
        'build-backend = "hatchling.build"\n\n'
        "[project]\n"
        f'name = "{dist}"\n'
        'version = "0.1.0"\n'
        f'description = "LLM-extracted critics for {benchmark}, admitted by modulo\'s extraction gate"\n'
        'requires-python = ">=3.11"\n'
        'dependencies = ["modulo"]\n\n'
        '[project.entry-points."modulo.critics"]\n' + "\n".join(entries) + "\n\n"
        "[tool.hatch.build.targets.wheel]\n"
        f'packages = ["{module}"]\n',
    )
    names = ", ".join(r.critic for r in admitted)
    write_text(
        out / "README.md",
        f"# {dist}\n\nLLM-extracted critics for {benchmark}: {names}.\n\n"
        f"Install with `pip install -e {out}`, then use them like any critic, e.g. "
        f"`modulo run benchmark={benchmark} critics=[format,{admitted[0].critic if admitted else '...'}]`. "
        "They are untrusted (source `llm-extracted`) and always run in modulo's sandbox. Each one's gate "
        f"report (confusion matrices on the training and held-out parts, counterexamples, prompt, model, "
        f"attempts) is in `{module}/gate/`.\n",
    )
    return out
