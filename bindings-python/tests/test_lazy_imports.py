"""`import ambit` leaves the modules most programs never touch for their first use (start-up, issue 18),
and every public name still resolves as it did."""
import subprocess
import sys

import ambit

LAZY_MODULES = ("ambit.knowledge", "ambit.ledger", "ambit.memory", "ambit.routines", "ambit.skills", "ambit.testmodel")


def test_import_ambit_does_not_load_the_rarely_used_modules() -> None:
    code = f"import sys, ambit; print(sorted(m for m in {LAZY_MODULES!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_lazy_names_are_the_modules_objects_and_every_public_name_resolves() -> None:
    from ambit.ledger import Ledger, LedgerError, RoutineLedger
    from ambit.routines import RunContext
    from ambit.testmodel import TestModel

    assert (ambit.Ledger, ambit.LedgerError, ambit.RoutineLedger) == (Ledger, LedgerError, RoutineLedger)
    assert ambit.RunContext is RunContext and ambit.TestModel is TestModel
    assert ambit.ledger is sys.modules["ambit.ledger"]
    for name in ambit.__all__:
        assert getattr(ambit, name) is not None, name
    try:
        ambit.no_such_name
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("an unknown name resolved")


def test_an_agent_refuses_a_wrong_memory_before_the_module_is_loaded() -> None:
    # The type checks in Agent(...) import what they compare with.
    code = ("import ambit\n"
            "try:\n"
            "    ambit.Agent(model=ambit.OpenAIChat('m', base_url='http://127.0.0.1:9/v1', api_key='k'), memory='x', agent_name='a')\n"
            "except ambit.ConfigError as e:\n"
            "    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "memory must be" in out, out
