"""Modules: a symbol with its executors, parameters and optimizer behind one training
and prediction API (``mx.mod.Module``, ``mx.mod.BucketingModule``, ``mx.mod.SequentialModule``, ``mx.mod.PythonLossModule``)."""

from __future__ import annotations

from .base_module import BaseModule
from .bucketing_module import BucketingModule
from .executor_group import DataParallelExecutorGroup
from .module import Module
from .python_module import PythonLossModule, PythonModule
from .sequential_module import SequentialModule

__all__ = ["BaseModule", "Module", "BucketingModule", "SequentialModule", "DataParallelExecutorGroup",
           "PythonModule", "PythonLossModule"]
