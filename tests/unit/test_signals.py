"""SIGTERM/SIGHUP as a stop: Terminated carries 128 + the signal, and the block records what arrived."""

from __future__ import annotations

import os
import signal

import pytest

from rocmstack.signals import INTERRUPTS, Terminated, stop_signals_interrupt, stops_deferred


def test_a_signal_in_the_block_raises_terminated_and_is_recorded():
    before = signal.getsignal(signal.SIGTERM)
    received: list[int] = []
    with pytest.raises(Terminated) as exc, stop_signals_interrupt(received):
        os.kill(os.getpid(), signal.SIGHUP)
    assert exc.value.code == 128 + signal.SIGHUP and exc.value.name == "SIGHUP"
    assert received == [signal.SIGHUP] and isinstance(exc.value, INTERRUPTS)
    assert signal.getsignal(signal.SIGTERM) is before  # the previous handlers are back


def test_a_deferred_ctrl_c_arrives_once_the_block_has_finished():
    before = signal.getsignal(signal.SIGINT)
    done = []
    with pytest.raises(KeyboardInterrupt), stops_deferred():
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)  # a second one while waiting: still one interrupt
        done.append("the block ran to its end")
    assert done == ["the block ran to its end"]
    assert signal.getsignal(signal.SIGINT) is before


def test_a_deferred_sigterm_goes_to_the_handler_that_was_there():
    received: list[int] = []
    with pytest.raises(Terminated) as exc, stop_signals_interrupt(received), stops_deferred():
        os.kill(os.getpid(), signal.SIGTERM)
        assert received == []  # not yet
    assert exc.value.code == 128 + signal.SIGTERM and received == [signal.SIGTERM]


def test_nothing_is_raised_without_a_signal():
    with stops_deferred():
        pass
