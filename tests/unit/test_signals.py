"""SIGTERM/SIGHUP as a stop: Terminated carries 128 + the signal, and the block records what arrived."""

from __future__ import annotations

import os
import signal

import pytest

from rocmstack.signals import INTERRUPTS, Terminated, stop_signals_interrupt


def test_a_signal_in_the_block_raises_terminated_and_is_recorded():
    before = signal.getsignal(signal.SIGTERM)
    received: list[int] = []
    with pytest.raises(Terminated) as exc, stop_signals_interrupt(received):
        os.kill(os.getpid(), signal.SIGHUP)
    assert exc.value.code == 128 + signal.SIGHUP and exc.value.name == "SIGHUP"
    assert received == [signal.SIGHUP] and isinstance(exc.value, INTERRUPTS)
    assert signal.getsignal(signal.SIGTERM) is before  # the previous handlers are back
