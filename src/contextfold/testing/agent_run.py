"""A tool-using agent run to script: twelve ordinary tools, a model that reads page after page, real-sized outputs.

What the framework integration tests and ``bench/bench_overflow.py`` run against the scripted server to show
that overflow recovery converges: the tools are what an agent commonly carries (files, shell, tests, git, web,
tickets), each with a realistic description and JSON schema, so that the request carries about 1,500 tokens of
tool schemas beside the conversation; the model reads one build-log page per turn with ``read_file`` and answers
at the end.

>>> len(ORDINARY_TOOLS), ORDINARY_TOOLS[0].name
(12, 'read_file')
>>> script = reading_script(3)  # 3 tool calls, then the final answer
>>> len(script)
4
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .wire import Reply, ScriptedToolCall

__all__ = ["FINAL_ANSWER", "ORDINARY_TOOLS", "PAGE_LINES", "ToolSpec", "chat_tools", "page", "reading_script",
           "responses_tools", "run_tool"]

# Lines of a build-log page: about 30 KB, 8,900 tokens: cut at write time even in gpt-4o's 128K window.
PAGE_LINES = 400
FINAL_ANSWER = "Every page is read: the build fails in the last module."


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as every framework declares one: name, description, JSON schema of the arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]


def _obj(required: list[str], **properties: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": dict(properties), "required": required}


_STR = {"type": "string"}
_INT = {"type": "integer"}

ORDINARY_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("read_file", "Read a text file from the workspace. Returns the requested lines with their line numbers; "
                          "use offset and limit to page through long files instead of reading them whole.",
             _obj(["path"], path={**_STR, "description": "Path relative to the workspace root"},
                  offset={**_INT, "description": "First line to return (1-based)"},
                  limit={**_INT, "description": "How many lines to return at most"})),
    ToolSpec("write_file", "Create or overwrite a file in the workspace with the given content. Parent directories "
                           "are created as needed. Returns the number of bytes written.",
             _obj(["path", "content"], path={**_STR, "description": "Path relative to the workspace root"},
                  content={**_STR, "description": "The complete new content of the file"})),
    ToolSpec("list_directory", "List the entries of a directory with their kind and size. Hidden files are left out "
                               "unless include_hidden is set.",
             _obj(["path"], path={**_STR, "description": "Directory relative to the workspace root"},
                  include_hidden={"type": "boolean", "description": "Also list entries starting with a dot"})),
    ToolSpec("grep", "Search the workspace for a regular expression and return matching lines as path:line:text. "
                     "Binary files and the .git directory are skipped.",
             _obj(["pattern"], pattern={**_STR, "description": "A Python regular expression"},
                  path={**_STR, "description": "Directory or file to search, the workspace root by default"},
                  max_results={**_INT, "description": "Stop after this many matches"})),
    ToolSpec("run_command", "Run a shell command in the workspace and return its exit code, standard output and "
                            "standard error. Commands time out after the given number of seconds.",
             _obj(["command"], command={**_STR, "description": "The command line, run with /bin/sh -c"},
                  timeout_s={**_INT, "description": "Seconds before the command is killed"})),
    ToolSpec("run_tests", "Run the project's test suite, or the tests matching a selector, and return a summary of "
                          "failures with their tracebacks.",
             _obj([], selector={**_STR, "description": "A pytest node id or -k expression"},
                  fail_fast={"type": "boolean", "description": "Stop at the first failure"})),
    ToolSpec("git_diff", "Show the uncommitted changes of the workspace as a unified diff, optionally limited to "
                         "some paths.",
             _obj([], paths={"type": "array", "items": _STR, "description": "Paths to limit the diff to"},
                  staged={"type": "boolean", "description": "Show staged changes instead of unstaged ones"})),
    ToolSpec("git_log", "Show recent commits with their hash, author, date and subject line.",
             _obj([], max_count={**_INT, "description": "How many commits to show"},
                  path={**_STR, "description": "Only commits touching this path"})),
    ToolSpec("search_docs", "Search the project's documentation and return the best matching sections with their "
                            "titles and a short excerpt.",
             _obj(["query"], query={**_STR, "description": "What to look for, in a few words"},
                  top_k={**_INT, "description": "How many sections to return"})),
    ToolSpec("http_get", "Fetch a URL over HTTP(S) and return the status code, the content type and the body as "
                         "text (truncated to max_bytes).",
             _obj(["url"], url={**_STR, "description": "An absolute http or https URL"},
                  max_bytes={**_INT, "description": "Bytes of the body to return at most"})),
    ToolSpec("create_ticket", "Open an issue in the team's tracker with a title, a description and labels. Returns "
                              "the new issue's id and URL.",
             _obj(["title", "body"], title={**_STR, "description": "One line saying what is wrong"},
                  body={**_STR, "description": "Steps to reproduce, what was expected, what happened"},
                  labels={"type": "array", "items": _STR, "description": "Labels such as bug or ci"})),
    ToolSpec("send_message", "Post a message to a team chat channel, for example to report a finished task or ask "
                             "a question that blocks the work.",
             _obj(["channel", "text"], channel={**_STR, "description": "The channel name without the #"},
                  text={**_STR, "description": "The message, plain text"})),
)


def chat_tools(specs: tuple[ToolSpec, ...] = ORDINARY_TOOLS) -> list[dict[str, Any]]:
    """The tools as Chat Completions ``tools=``."""
    return [{"type": "function", "function": {"name": s.name, "description": s.description,
                                              "parameters": dict(s.parameters)}} for s in specs]


def responses_tools(specs: tuple[ToolSpec, ...] = ORDINARY_TOOLS) -> list[dict[str, Any]]:
    """The tools as Responses ``tools=``."""
    return [{"type": "function", "name": s.name, "description": s.description, "parameters": dict(s.parameters)}
            for s in specs]


def page(number: int, lines: int = PAGE_LINES) -> str:
    """Page ``number`` of the build log ``read_file`` returns."""
    rows = [f"{i:4d}  compiling module_{number}_{i} with flags -O2 -Wall ... ok ({(i * 37 + number) % 900} ms)"
            for i in range(1, lines + 1)]
    return f"build.log page {number}\n" + "\n".join(rows)


def run_tool(name: str, arguments: Mapping[str, Any] | str) -> str:
    """What the scripted run's tools return: ``read_file`` a log page, the others a one-line acknowledgement."""
    args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
    if name == "read_file":
        return page(int(args.get("offset") or 0))
    return f"{name}: done"


def reading_script(turns: int) -> list[Reply | str]:
    """The model reads page 0, 1, … ``turns - 1`` of the build log with ``read_file``, then answers."""
    calls: list[Reply | str] = [
        Reply.calling(ScriptedToolCall("read_file", {"path": "build.log", "offset": turn, "limit": PAGE_LINES},
                                       id=f"call_{turn}"), text=f"Page {turn - 1} is clean; reading page {turn}.")
        for turn in range(turns)]
    return [*calls, FINAL_ANSWER]
