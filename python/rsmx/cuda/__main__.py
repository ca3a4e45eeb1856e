"""``python -m rsmx.cuda``: prints the CUDA parts found and the usable GPUs."""

from . import diagnose

print(diagnose())
