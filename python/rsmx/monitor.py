"""Monitor: statistics of every op's outputs (and optionally inputs) during training."""

from __future__ import annotations

import logging
import re
from math import sqrt

from . import ndarray as nd
from .ndarray import NDArray

__all__ = ["Monitor"]


class Monitor:
    """Collects ``stat_func(array)`` of the arrays whose names match ``pattern`` every
    ``interval`` batches, between ``tic`` and ``toc``."""

    def __init__(self, interval: int, stat_func=None, pattern: str = ".*", sort: bool = False,
                 monitor_all: bool = False):
        if stat_func is None:

            def asum_stat(x: NDArray) -> NDArray:
                return nd.norm(x) / sqrt(x.size)

            stat_func = asum_stat
        self.stat_func = stat_func
        self.interval = interval
        self.activated = False
        self.queue: list[tuple[int, str, NDArray]] = []
        self.step = 0
        self.exes: list = []
        self.re_prog = re.compile(pattern)
        self.sort = sort
        self.monitor_all = monitor_all

        def stat_helper(name: str, array: NDArray) -> None:
            if not self.activated or not self.re_prog.match(name):
                return
            self.queue.append((self.step, name, self.stat_func(array)))

        self.stat_helper = stat_helper

    def install(self, exe) -> None:
        """Watches executor ``exe``."""
        exe.set_monitor_callback(self.stat_helper, self.monitor_all)
        self.exes.append(exe)

    def tic(self) -> None:
        """Starts collecting for this batch if it is due."""
        if self.step % self.interval == 0:
            for exe in self.exes:
                for array in exe.arg_arrays:
                    array.wait_to_read()
                for array in exe.aux_arrays:
                    array.wait_to_read()
            self.queue = []
            self.activated = True
        self.step += 1

    def toc(self) -> list[tuple[int, str, str]]:
        """Stops collecting; returns ``(step, name, value string)`` for each statistic."""
        if not self.activated:
            return []
        for exe in self.exes:
            for array in exe.arg_arrays:
                array.wait_to_read()
            for array in exe.aux_arrays:
                array.wait_to_read()
        for exe in self.exes:
            for name, array in zip(exe._symbol.list_arguments(), exe.arg_arrays, strict=True):
                if self.re_prog.match(name):
                    self.queue.append((self.step, name, self.stat_func(array)))
        self.activated = False
        res = []
        if self.sort:
            self.queue.sort(key=lambda x: x[1])
        for n, k, v_list in self.queue:
            if isinstance(v_list, NDArray):
                v_list = [v_list]
            s = ""
            for v in v_list:
                if v.shape in ((1,), ()):
                    s += str(v.asscalar()) + "\t"
                else:
                    s += str(v.asnumpy()) + "\t"
            res.append((n, k, s))
        self.queue = []
        return res

    def toc_print(self) -> None:
        """``toc`` and log each statistic."""
        for n, k, v in self.toc():
            logging.info("Batch: %7d %30s %s", n, k, v)
