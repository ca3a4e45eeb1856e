"""``mx.optimizer``: optimizers, their registry, and the ``Updater`` a KVStore applies.

``mx.optimizer.create('sgd', learning_rate=0.1, momentum=0.9)`` makes an optimizer by
case-insensitive name; ``Optimizer.register`` adds a class to the registry.
"""

from __future__ import annotations

from ..ndarray import abs as NDabs  # noqa: N812  (MXNet exports it here)
from . import contrib
from .adaptive import FTML, AdaDelta, AdaGrad, Adam, Ftrl, RMSProp
from .large_batch import LAMB, LARS, LBSGD
from .optimizer import Optimizer, create, register
from .other import DCASGD, SGLD, Adamax, Nadam, Test
from .sgd import NAG, SGD, Signum, ccSGD
from .updater import Updater, get_updater

__all__ = [
    "AdaDelta",
    "AdaGrad",
    "Adam",
    "Adamax",
    "DCASGD",
    "FTML",
    "Ftrl",
    "LAMB",
    "LARS",
    "LBSGD",
    "NAG",
    "NDabs",
    "Nadam",
    "Optimizer",
    "RMSProp",
    "SGD",
    "SGLD",
    "Signum",
    "Test",
    "Updater",
    "ccSGD",
    "create",
    "get_updater",
    "register",
    "contrib",
]
