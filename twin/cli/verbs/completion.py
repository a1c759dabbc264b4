"""`twin completion SHELL`: a completion script for bash, zsh or fish, made from the verbs'
own arguments (so it never drifts from them); node and port names come from the lab directory
on the command line as it is typed (`twin completion --names DIR`, which reads the lab's
design.json alone: fast, and quiet when DIR is no lab).

    source <(twin completion bash)                      # bash, e.g. in ~/.bashrc
    source <(twin completion zsh)                       # zsh (through bashcompinit)
    twin completion fish > ~/.config/fish/completions/twin.fish
"""

from __future__ import annotations

import argparse
import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from twin import safeio
from twin.errors import TwinError

HELP = "print a shell completion script (bash, zsh, fish)"


NAMED = {"exec": "--names", "fault": "--links"}
"""The verbs whose words after the lab directory are names: of nodes and roles (exec), of
nodes and links (fault)."""
# the largest design.json read: twin.intent.inputs.LAB_FILE_BYTES, not imported (pydantic)
DESIGN_BYTES = 64 << 20
ROLE_WORDS = ("leaves", "spines", "superspines", "servers", "switches", "all")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of this verb."""
    p.add_argument("shell", nargs="?", choices=("bash", "zsh", "fish"))
    given = p.add_mutually_exclusive_group()
    given.add_argument(
        "--names", type=Path, metavar="DIR", help="print the lab's node names and role words"
    )
    given.add_argument(
        "--links",
        type=Path,
        metavar="DIR",
        help="print the lab's node names and its links as NODE:PORT and NODE:PEER",
    )


def names(lab: Path, links: bool) -> list[str]:
    """A lab's node names, then the role words `twin exec` takes or (`links`) each link as
    NODE:PORT and NODE:PEER from both ends; nothing when `lab` holds no readable design."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError, TwinError):
        graph = json.loads(safeio.read(lab / "design.json", DESIGN_BYTES) or b"")["graph"]
        nodes = [str(n["id"]) for n in graph["nodes"]]
        if not links:
            return [*nodes, *ROLE_WORDS]
        ends = set()
        for e in graph["links"]:
            for mine, theirs in (("a", "b"), ("b", "a")):
                ends |= {f"{e[mine]}:{e[mine + '_port']}", f"{e[mine]}:{e[theirs]}"}
        return [*nodes, *sorted(ends)]
    return []


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
    return
  fi
  local w kind=
  case ${{COMP_WORDS[1]}} in {" ".join(f"{v}) kind={o};;" for v, o in NAMED.items())} esac
  if [ -n "$kind" ]; then
    # bash splits words at ':' (COMP_WORDBREAKS): match the whole word typed, then offer
    # what follows the part of it bash already holds
    local full=$cur
    if [ -n "$COMP_LINE" ]; then full=${{COMP_LINE:0:COMP_POINT}}; full=${{full##* }}; fi
    for w in "${{COMP_WORDS[@]:2:COMP_CWORD-2}}"; do
      if [ -f "$w/design.json" ]; then
        COMPREPLY=($(compgen -W "$(twin completion $kind "$w" 2>/dev/null)" -- "$full"))
        if [[ $full != "$cur" ]]; then COMPREPLY=("${{COMPREPLY[@]#"${{full%"$cur"}}"}}"); fi
        [ ${{#COMPREPLY[@]}} -gt 0 ] && return
      fi
    done
  fi
  COMPREPLY=($(compgen -W "$words" -- "$cur") $(compgen -f -- "$cur"))
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
    lab = "(for w in (commandline -opc); test -f $w/design.json; and echo $w; end)[1]"
    for v in all_verbs:
        lines.append(
            f"complete -c twin -n __fish_use_subcommand -a {v.name} -d {_fish_quote(v.help)}"
        )
        if v.name in NAMED:
            lines.append(
                f"complete -c twin -n '__fish_seen_subcommand_from {v.name}' "
                f"-a '(twin completion {NAMED[v.name]} {lab} 2>/dev/null)'"
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
    """Print the script, or a lab's names."""
    if args.names is not None or args.links is not None:
        print("\n".join(names(args.names or args.links, links=args.links is not None)))
        return 0
    if args.shell is None:
        raise TwinError("twin completion: give a shell (bash, zsh, fish) or --names DIR")
    print({"bash": bash, "zsh": zsh, "fish": fish}[args.shell](verbs()), end="")
    return 0
