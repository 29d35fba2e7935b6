"""Every command spells an option the same way: a long option that has a short form on
one command has the same short form on every command that takes it, and a short form
means one long option everywhere."""

import argparse

from scalecheck.cli import build_parser


def _options(parser: argparse.ArgumentParser, command: str, found: dict) -> None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                _options(sub, f"{command} {name}".strip(), found)
        elif action.option_strings:
            short = tuple(sorted(o for o in action.option_strings if not o.startswith("--")))
            for option in action.option_strings:
                if option.startswith("--"):
                    found.setdefault(option, {})[command] = short


def test_the_same_short_options_on_every_command():
    found: dict = {}
    _options(build_parser(), "", found)
    differing = {option: by for option, by in found.items() if len(set(by.values())) > 1}
    assert not differing
    meanings: dict = {}
    for option, by in found.items():
        for short in {s for shorts in by.values() for s in shorts}:
            meanings.setdefault(short, set()).add(option)
    assert {short: longs for short, longs in meanings.items() if len(longs) > 1} == {}
    assert found["--jobs"]["analyze"] == found["--jobs"]["run"] == ("-j",)
