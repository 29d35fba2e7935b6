"""The one build step pyproject.toml cannot declare: the wheel carries the native sources
(tracer/, native/) that scalecheck builds on first use (src/scalecheck/common/sources.py), copied
into the package as scalecheck/_sources without build outputs."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
SHIPPED_DIRS = ("tracer", "native")
# Build outputs and caches next to the sources (each directory's .gitignore lists them).
NOT_SHIPPED = shutil.ignore_patterns(
    "target", "bin", "build", "obj", "__pycache__", "*.o", "*.a", "*.so"
)


class BuildWithSources(build_py):
    def run(self):
        super().run()
        if self.editable_mode:  # an editable install uses the checkout itself
            return
        shipped = Path(self.build_lib) / "scalecheck" / "_sources"
        shutil.rmtree(shipped, ignore_errors=True)
        for name in SHIPPED_DIRS:
            shutil.copytree(HERE / name, shipped / name, ignore=NOT_SHIPPED)


setup(cmdclass={"build_py": BuildWithSources})
