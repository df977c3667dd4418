"""Build step that bundles the project's top-level folders into the wheel.

kernels/, milestones/ (the variant catalogue) and datasets/ (the Fashion-MNIST test split and the LeNet-86
weights, with their provenance files) stay where they are in the repository; a built package carries
copies as convnet/_bundled/<folder>, which convnet.paths.bundled() finds. Editable installs read the
checkout's folders directly, so nothing is copied for them. Kernels built ahead of time (make kernels, in
build/kernels) go in as convnet/_bundled/prebuilt where they are there: the installed package then loads them
instead of running nvcc."""
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

BUNDLED = {
    "kernels": ("*.cu", "*.cuh", "*/*.cuh"),
    "milestones": ("*.toml", "archive/*.toml"),
    "datasets": ("fashion-mnist/*", "lenet86/*"),
    "build/kernels": ("manifest.json", "*/*.cubin", "*/*.log"),
}
RENAMED = {"build/kernels": "prebuilt"}


class BuildPyWithBundledFolders(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        here = Path(__file__).resolve().parent
        for folder, patterns in BUNDLED.items():
            for pattern in patterns:
                for src in sorted((here / folder).glob(pattern)):
                    if src.is_file():
                        rel = src.relative_to(here / folder)
                        dst = Path(self.build_lib, "convnet", "_bundled", RENAMED.get(folder, folder), rel)
                        self.mkpath(str(dst.parent))
                        self.copy_file(str(src), str(dst))


setup(cmdclass={"build_py": BuildPyWithBundledFolders})
