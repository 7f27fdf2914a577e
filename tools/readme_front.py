"""Draw docs/images/quickstart-front.png, the README's picture: the front of studies/quickstart.yaml.

``python tools/readme_front.py`` runs the quickstart study as bundled (its own search settings and seed)
and saves `dse.StudyResult.plot_front` of latency against energy, the PNG's ``Source`` text naming what
drew it. tests/test_readme_claims.py checks that the README shows this file, that its ``Source`` is
`SOURCE`, and that `figure` draws a study's front.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PICTURE = ROOT / "docs" / "images" / "quickstart-front.png"
STUDY = "studies/quickstart.yaml"
AXES = ("latency", "energy")
SOURCE = f"tools/readme_front.py: the Pareto front of {STUDY}, {AXES[0]} against {AXES[1]}"


def figure(result):
    """The picture's matplotlib figure: ``result``'s front over `AXES`."""
    fig = result.plot_front(*AXES)
    fig.set_size_inches(6.4, 4.0)
    return fig


def main() -> None:
    import dse
    result = dse.load_study(ROOT / STUDY).run()
    PICTURE.parent.mkdir(parents=True, exist_ok=True)
    figure(result).savefig(PICTURE, dpi=100, metadata={"Source": SOURCE, "Date": None, "Software": None})
    print(f"wrote {PICTURE.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
