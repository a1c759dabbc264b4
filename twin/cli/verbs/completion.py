"""`twin completion SHELL`: a completion script for bash, zsh or fish, made from the verbs'
own arguments (so it never drifts from them).

    source <(twin completion bash)                      # bash, e.g. in ~/.bashrc
    source <(twin completion zsh)                       # zsh (through bashcompinit)
    twin completion fish > ~/.config/fish/completions/twin.fish
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

HELP = "print a shell completion script (bash, zsh, fish)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("shell", choices=("bash", "zsh", "fish"))


@dataclass
class Verb:
    """What completes after `twin VERB`: its options (with their choices) and sub-verbs."""

    name: str
    help: str
    options: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    """Option -> (help, choices; [] for a free value, ['!'] for a flag)."""
    words: list[str] = field(default_factory=list)


def _walk(p: argparse.ArgumentParser, verb: Verb) -> None:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                verb.words.append(name)
                _walk(sub, verb)
            continue
        choices = [str(c) for c in action.choices or []]
        flag = action.nargs == 0
        for option in action.option_strings:
            if option.startswith("--"):
                verb.options[option] = (action.help or "", ["!"] if flag else choices)
        if not action.option_strings and choices:
            verb.words += choices


def verbs() -> list[Verb]:
    """Every verb with its options, from the parser."""
    from twin.cli import main

    top = main.parser(main.VERBS)
    found = []
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                verb = Verb(name, main.VERBS[name])
                _walk(sub, verb)
                found.append(verb)
    return found


TOP = "--help --version --verbose --debug --log-file"
"""The options before the verb."""


def bash(all_verbs: list[Verb]) -> str:
    """The bash script (zsh runs it through bashcompinit)."""
    cases = []
    for v in all_verbs:
        choices = [
            f"      {o}) COMPREPLY=($(compgen -W '{' '.join(c)}' -- \"$cur\")); return;;"
            for o, (_, c) in v.options.items()
            if c and c != ["!"]
        ]
        cases.append(
            f"    {v.name})\n      opts='{' '.join(v.options)}'; words='{' '.join(v.words)}'\n"
            f"      case $prev in\n" + "\n".join(choices) + "\n      esac;;"
        )
    names = " ".join(v.name for v in all_verbs)
    return f"""# twin completion for bash (source <(twin completion bash))
_twin() {{
  local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}} opts= words=
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W '{names} {TOP}' -- "$cur")); return
  fi
  case ${{COMP_WORDS[1]}} in
{chr(10).join(cases)}
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$opts --help" -- "$cur"))
  else
    COMPREPLY=($(compgen -W "$words" -- "$cur") $(compgen -f -- "$cur"))
  fi
}}
complete -o filenames -F _twin twin
"""


def zsh(all_verbs: list[Verb]) -> str:
    """The zsh script: the bash one through zsh's bashcompinit."""
    return "# twin completion for zsh\nautoload -U +X bashcompinit && bashcompinit\n" + bash(
        all_verbs
    )


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish(all_verbs: list[Verb]) -> str:
    """The fish script."""
    lines = [
        "# twin completion for fish",
        "complete -c twin -f -l version -d 'print the version'",
        "complete -c twin -f -s v -l verbose -d 'log the steps (INFO)'",
        "complete -c twin -f -l debug -d 'log every command a backend runs (DEBUG)'",
        "complete -c twin -r -l log-file -d 'append the log to PATH'",
    ]
    for v in all_verbs:
        lines.append(
            f"complete -c twin -n __fish_use_subcommand -a {v.name} -d {_fish_quote(v.help)}"
        )
        seen = f"__fish_seen_subcommand_from {v.name}"
        if v.words:
            lines.append(f"complete -c twin -n '{seen}' -a {_fish_quote(' '.join(v.words))}")
        for option, (text, choices) in v.options.items():
            line = f"complete -c twin -n '{seen}' -l {option[2:]} -d {_fish_quote(text[:60])}"
            if choices and choices != ["!"]:
                line += f" -xa {_fish_quote(' '.join(choices))}"
            elif not choices:
                line += " -r"
            lines.append(line)
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    """Print the script."""
    print({"bash": bash, "zsh": zsh, "fish": fish}[args.shell](verbs()), end="")
    return 0
