"""Benchmark of issue 14's agents: SmolLM2 calling BFCL's functions, with and without constraint.

What is measured, with SmolLM2-135M-Instruct served by forgeml (`forgeml serve`'s app,
uvicorn in a thread) and driven by the real `openai` client through the chat route, on
the BFCL questions of the `bfcl-eval` wheel (fetched with `pip download --no-deps`):

- simple (simple_python), multiple and parallel: each question asked twice, the same
  prompt both times (the functions rendered into it the way the server renders `tools` for
  SmolLM2's template, which takes none):
  - constrained: `tools` with `tool_choice` "required", so the server decodes the reply
    under the tool-calls JSON schema (lm-format-enforcer); one call for simple and
    multiple (`parallel_tool_calls` off), any number for parallel;
  - free text (the baseline): the tools in the system prompt and no `tools`, the reply
    parsed for `<tool_call>` blocks by forgeml.serve.tool_calls.parse_tool_calls;
- per category and path: the schema-valid rate (the reply holds at least one call and
  every call names a declared function with arguments valid against its JSON schema,
  checked here again with `jsonschema`; goal 100% constrained) and the accuracy by BFCL's
  AST check (benchmarks/_bfcl_ast.py, its rules written plainly: the wheel's checker does
  not import with what forgeml installs; a reply that does not parse counts as wrong);
- irrelevance: the functions cannot answer the question; asked with `tool_choice` "auto"
  (the only mode in which the model may decline), a refusal is a reply with no tool call
  and no `<tool_call>` block (read it beside the free-text path's "called" column: a model
  that never calls a tool unconstrained refuses everything);
- budgets: questions of the three categories run through forgeml.agents.run_loop with
  small step, wall-time and token budgets, the model asked with `tool_choice` "required"
  so that it calls a tool every turn and never answers: only the budgets can stop the run
  (the functions run as tools that only record the call: BFCL has no backend to execute
  them). Every run must stop with a `StopReason`, no model call may start once a budget
  is spent, no reply may be asked for more tokens than the run has left, and no reply may
  spend more than it was allowed.

`--quick` asks one question per category, bounds the unconstrained replies at
QUICK_FREE_TOKENS, and runs the agent on simple questions only with budgets spent after a
reply or two (QUICK_BUDGETS): every row of the full run, from less work.

Greedy decoding throughout; every question and agent run is submitted at once,
`--concurrency` of them in flight (the server batches them), so a reply's seconds are
under that load, not alone.

Run from the repository root:

    PYTHONPATH=src .venv/bin/python benchmarks/agents.py            # 8 per category
    PYTHONPATH=src .venv/bin/python benchmarks/agents.py --quick    # 1 per category
    PYTHONPATH=src .venv/bin/python benchmarks/agents.py --json     # JSON object last

The model is imported once into benchmarks/out/llm/home (shared with benchmarks/llm.py's
`--quick`) and reused.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from _bfcl import Item, fetch_bfcl_wheel, load_items, openai_tools, spread
from _bfcl_ast import Call, check
from _cli import make_parser, print_json
from _lm_server import MODEL, cached_model_home, serving

CALL_CATEGORIES = ("simple", "multiple", "parallel")
# sized for a shared 2-core machine, where one reply takes 10-40 s: the full run ~15 min
FULL_PER_CATEGORY, QUICK_PER_CATEGORY = 8, 1
FULL_AGENT_RUNS, QUICK_AGENT_RUNS = 6, 3


def max_tokens(category: str, free: bool = False, quick: bool = False) -> int:
    """One reply's bound: BFCL's answers take up to ~100 tokens as JSON, parallel ones
    (several calls) up to ~250. `--quick` bounds the unconstrained replies (`free`), which
    SmolLM2 writes on to the bound and which were most of a run's time, at
    QUICK_FREE_TOKENS; a constrained reply ends where its JSON does."""
    if free and quick:
        return QUICK_FREE_TOKENS
    return 256 if category == "parallel" else 128


QUICK_FREE_TOKENS = 48


# the budgets agent runs cycle through, each tight on one of steps, seconds and tokens
BUDGETS = (
    {"max_steps": 2, "max_time_s": 600.0, "max_tokens": 100_000, "max_reply_tokens": 128},
    {"max_steps": 8, "max_time_s": 8.0, "max_tokens": 100_000, "max_reply_tokens": 128},
    {"max_steps": 8, "max_time_s": 600.0, "max_tokens": 1_200, "max_reply_tokens": 128},
)
# `--quick`: the same kinds, each spent after a reply or two
QUICK_BUDGETS = (
    {"max_steps": 1, "max_time_s": 600.0, "max_tokens": 100_000, "max_reply_tokens": 128},
    BUDGETS[1],
    {"max_steps": 8, "max_time_s": 600.0, "max_tokens": 600, "max_reply_tokens": 128},
)


@dataclass
class Outcome:
    """One question's reply on one path."""

    calls: list[Call] = field(default_factory=list)
    schema_valid: bool = False
    accurate: bool = False
    attempted_call: bool = False
    reason: str = ""
    seconds: float = 0.0
    finish: str = ""


# -- the two paths ---------------------------------------------------------------------


def validate_calls(
    calls: list[tuple[str, Any]], tools: list[dict[str, Any]]
) -> tuple[list[Call], str]:
    """`calls` (name, arguments JSON text) as BFCL calls, and why they are off schema
    ("" when every one names a declared tool with arguments valid against its schema)."""
    import jsonschema

    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    parsed: list[Call] = []
    for name, arguments_text in calls:
        if name not in schemas:
            return parsed, f"called {name}, which is not declared"
        try:
            arguments = json.loads(arguments_text)
        except json.JSONDecodeError:
            return parsed, f"the arguments of {name} are not JSON"
        error = jsonschema.exceptions.best_match(
            jsonschema.validators.validator_for(schemas[name])(schemas[name]).iter_errors(arguments)
        )
        if error is not None:
            return parsed, f"the arguments of {name} are off its schema: {error.message}"
        parsed.append({name: arguments})
    return parsed, "" if parsed else "no call"


def with_tools_prompt(messages: list[dict[str, str]], tools: list[dict[str, Any]]) -> list:
    """`messages` with the tools declared in the system turn, as the server renders `tools`
    for a chat template that takes none (forgeml.serve.tool_prompt)."""
    from forgeml.serve.tool_prompt import tools_system_block

    block = tools_system_block(tools)
    if messages and messages[0]["role"] == "system":
        return [
            {"role": "system", "content": f"{messages[0]['content']}\n\n{block}"},
            *messages[1:],
        ]
    return [{"role": "system", "content": block}, *messages]


def _score(item: Item, outcome: Outcome) -> Outcome:
    if outcome.schema_valid:
        outcome.accurate, why = check(item.functions, outcome.calls, item.answers, item.category)
        outcome.reason = outcome.reason or why
    return outcome


def constrained(client: Any, item: Item, quick: bool = False) -> Outcome:
    """The question with `tools` and `tool_choice` "required": the server constrains it."""
    tools = openai_tools(item.functions)
    begin = time.perf_counter()
    completion = client.chat.completions.create(
        model=MODEL,
        messages=item.messages,
        tools=tools,
        tool_choice="required",
        parallel_tool_calls=item.category == "parallel",
        temperature=0,
        max_tokens=max_tokens(item.category),
    )
    message = completion.choices[0].message
    written = [(c.function.name, c.function.arguments) for c in message.tool_calls or []]
    calls, reason = validate_calls(written, tools)
    if not written:
        reason = f"no call (finish {completion.choices[0].finish_reason})"
    outcome = Outcome(calls, not reason, attempted_call=bool(written), reason=reason)
    outcome.seconds = time.perf_counter() - begin
    outcome.finish = completion.choices[0].finish_reason
    return _score(item, outcome)


def free_text(client: Any, item: Item, quick: bool = False) -> Outcome:
    """The same prompt without `tools`; the reply's text parsed as forgeml's server does."""
    from forgeml.core.errors import InvalidDataError
    from forgeml.serve.tool_calls import parse_tool_calls

    tools = openai_tools(item.functions)
    begin = time.perf_counter()
    completion = client.chat.completions.create(
        model=MODEL,
        messages=with_tools_prompt(item.messages, tools),
        temperature=0,
        max_tokens=max_tokens(item.category, free=True, quick=quick),
    )
    text = completion.choices[0].message.content or ""
    outcome = Outcome(
        attempted_call="<tool_call>" in text, finish=completion.choices[0].finish_reason
    )
    try:
        parsed = parse_tool_calls(text, tools)
    except InvalidDataError as error:
        outcome.reason = str(error)
    else:
        outcome.calls, outcome.reason = validate_calls(
            [(c.name, c.arguments) for c in parsed], tools
        )
        outcome.schema_valid = not outcome.reason
    outcome.seconds = time.perf_counter() - begin
    return _score(item, outcome)


def auto(client: Any, item: Item, quick: bool = False) -> Outcome:
    """An irrelevance question with `tool_choice` "auto": did the model call nothing?"""
    begin = time.perf_counter()
    completion = client.chat.completions.create(
        model=MODEL,
        messages=item.messages,
        tools=openai_tools(item.functions),
        tool_choice="auto",
        temperature=0,
        max_tokens=max_tokens(item.category, free=True, quick=quick),
    )
    message = completion.choices[0].message
    attempted = bool(message.tool_calls) or "<tool_call>" in (message.content or "")
    return Outcome(attempted_call=attempted, seconds=time.perf_counter() - begin)


# -- budgets through the agent loop ----------------------------------------------------


@dataclass
class ModelCall:
    """What the agent loop asked of the model, and when."""

    started_s: float
    tokens_before: int
    max_tokens: int | None
    completion_tokens: int = 0


class RecordingModel:
    """A `ChatModel` that passes each call on and records it against the run's clock.

    With `tool_choice` "required" every reply is a tool call, so the run never answers
    and only its budgets can stop it: the agent that never stops, made on purpose.
    """

    def __init__(
        self, inner: Any, clock: Callable[[], float], tool_choice: str | None = None
    ) -> None:
        self.inner, self.clock, self.origin = inner, clock, clock()
        self.tool_choice = tool_choice
        self.calls: list[ModelCall] = []
        self.tokens = 0

    def chat(self, messages: list[dict[str, Any]], **options: Any) -> Any:
        record = ModelCall(self.clock() - self.origin, self.tokens, options.get("max_tokens"))
        self.calls.append(record)
        if self.tool_choice is not None:
            options["tool_choice"] = self.tool_choice
        reply = self.inner.chat(messages, **options)
        record.completion_tokens = reply.completion_tokens
        self.tokens += reply.prompt_tokens + reply.completion_tokens
        return reply


def recording_tool(openai_tool: dict[str, Any]) -> Any:
    """A forgeml tool with a BFCL function's schema that records the call and says so."""
    from pydantic import BaseModel, ConfigDict

    from forgeml.agents import Tool, ToolArgumentsError

    function = openai_tool["function"]

    class Arguments(BaseModel):
        model_config = ConfigDict(extra="allow")

    class SchemaTool(Tool):
        def schema(self) -> dict[str, Any]:
            return openai_tool

        def validate(self, arguments_json: str) -> dict[str, Any]:
            calls, reason = validate_calls([(self.name, arguments_json or "{}")], [openai_tool])
            if reason:
                raise ToolArgumentsError(f"The call is off the tool's schema: {reason}.")
            return {"arguments": calls[0][self.name]}

    def record(arguments: dict[str, Any]) -> str:
        return json.dumps({"recorded": function["name"], "arguments": arguments})

    return SchemaTool(function["name"], function.get("description", ""), record, Arguments)


def budget_run(chat: Any, item: Item, limits: dict[str, Any]) -> dict[str, Any]:
    """One agent run of `item` under `limits`, and whether it kept to them."""
    from forgeml.agents import Budgets, RunState, ToolRegistry, run_loop

    budgets = Budgets(**limits)
    clock = time.monotonic
    model = RecordingModel(chat, clock, tool_choice="required")
    registry = ToolRegistry([recording_tool(t) for t in openai_tools(item.functions)])
    state = RunState(run_id=item.id, spec={}, messages=list(item.messages))
    state = run_loop(model, registry, state, budgets, model_name=MODEL, clock=clock)
    return {"id": item.id, "budgets": limits, **judge_run(state, budgets, model.calls)}


def judge_run(state: Any, budgets: Any, calls: list[ModelCall]) -> dict[str, Any]:
    """Whether a finished run kept to `budgets`: a structured stop reason, no model call
    started once a budget was spent, none asked for more tokens than were left or spent
    more than it asked for, and a budget stop naming a budget that was in fact spent."""
    from forgeml.agents import StopReason

    broken = []
    if not isinstance(state.stop_reason, StopReason):
        broken.append("no structured stop reason")
    if state.steps > budgets.max_steps or len(calls) > budgets.max_steps:
        broken.append(f"{len(calls)} model calls for {budgets.max_steps} steps")
    for number, call in enumerate(calls, 1):
        left = budgets.max_tokens - call.tokens_before
        if call.started_s >= budgets.max_time_s or call.tokens_before >= budgets.max_tokens:
            broken.append(f"model call {number} started after a budget was spent")
        if call.max_tokens is None or call.max_tokens > min(left, budgets.max_reply_tokens):
            broken.append(f"model call {number} asked for {call.max_tokens} of {left} tokens")
        elif call.completion_tokens > call.max_tokens:
            broken.append(f"model call {number} spent {call.completion_tokens} tokens")
    spent = {
        StopReason.MAX_STEPS: state.steps >= budgets.max_steps,
        StopReason.MAX_TIME: state.elapsed_s >= budgets.max_time_s,
        StopReason.MAX_TOKENS: state.tokens >= budgets.max_tokens,
    }
    if not spent.get(state.stop_reason, True):
        broken.append(f"stopped for {state.stop_reason} with that budget unspent")
    return {
        "stop_reason": str(state.stop_reason),
        "steps": state.steps,
        "tokens": state.tokens,
        "elapsed_s": state.elapsed_s,
        "within_budgets": not broken,
        "broken": broken,
        "error": state.error,
    }


# -- the run ---------------------------------------------------------------------------


def summarise(outcomes: list[Outcome]) -> dict[str, Any]:
    count = len(outcomes)
    return {
        "n": count,
        "schema_valid": sum(o.schema_valid for o in outcomes) / count,
        "ast_accuracy": sum(o.accurate for o in outcomes) / count,
        "attempted_call": sum(o.attempted_call for o in outcomes) / count,
        "cut_short": sum(o.finish == "length" for o in outcomes),
        "reply_p50_s": statistics.median(o.seconds for o in outcomes),
        "failures": [o.reason for o in outcomes if not o.accurate][:5],
    }


def measure(
    url: str, items: dict[str, list[Item]], agent_items: list[Item], workers: int, quick: bool
) -> dict:
    """Every question and agent run at once, `workers` in flight: the server batches them."""
    import openai

    from forgeml.prompts import ChatClient

    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=600)
    chat = ChatClient(f"{url}/v1", MODEL, timeout_s=600, max_retries=0)
    budgets = QUICK_BUDGETS if quick else BUDGETS
    paths: dict[str, Callable[[Any, Item, bool], Outcome]] = {
        "constrained": constrained,
        "free_text": free_text,
    }
    with ThreadPoolExecutor(workers) as pool:
        pending_runs = [
            pool.submit(budget_run, chat, item, budgets[number % len(budgets)])
            for number, item in enumerate(agent_items)
        ]
        pending = {
            (category, name): [pool.submit(path, client, item, quick) for item in items[category]]
            for category in CALL_CATEGORIES
            for name, path in paths.items()
        }
        pending_refusals = [pool.submit(auto, client, item, quick) for item in items["irrelevance"]]
        figures: dict[str, Any] = {category: {} for category in CALL_CATEGORIES}
        for (category, name), futures in pending.items():
            figures[category][name] = summarise([future.result() for future in futures])
            progress(f"{category}, {name}: {len(futures)} questions")
        refusals = [future.result() for future in pending_refusals]
        progress(f"irrelevance: {len(refusals)} questions")
        runs = [future.result() for future in pending_runs]
        progress(f"agent runs: {len(runs)}")
    figures["irrelevance"] = {
        "n": len(refusals),
        "refusal_rate": sum(not o.attempted_call for o in refusals) / len(refusals),
    }
    figures["budgets"] = {
        "runs": len(runs),
        "within_budgets": sum(r["within_budgets"] for r in runs),
        "stop_reasons": {r: sum(x["stop_reason"] == r for x in runs) for r in _reasons(runs)},
        "broken": [r for r in runs if not r["within_budgets"]],
    }
    return figures


def progress(what: str) -> None:
    """A line on stderr saying what is done (the table comes at the end)."""
    print(f"[{time.strftime('%H:%M:%S')}] {what}", file=sys.stderr, flush=True)


def _reasons(runs: list[dict[str, Any]]) -> list[str]:
    return sorted({r["stop_reason"] for r in runs})


def print_table(figures: dict[str, Any]) -> None:
    print(
        f"{'category':<12}{'n':>4}{'path':>14}{'called':>8}{'schema-valid':>14}{'AST acc':>10}"
        f"{'cut short':>11}{'p50 s':>8}"
    )
    for category in CALL_CATEGORIES:
        for path, row in figures[category].items():
            print(
                f"{category:<12}{row['n']:>4}{path:>14}{row['attempted_call']:>8.0%}"
                f"{row['schema_valid']:>14.0%}{row['ast_accuracy']:>10.0%}{row['cut_short']:>11}"
                f"{row['reply_p50_s']:>8.1f}"
            )
    irrelevance = figures["irrelevance"]
    print(f"irrelevance {irrelevance['n']:>4}: refusals {irrelevance['refusal_rate']:.0%}")
    budgets = figures["budgets"]
    print(
        f"agent runs within budgets: {budgets['within_budgets']}/{budgets['runs']} "
        f"(stop reasons {budgets['stop_reasons']})"
    )


def main() -> None:
    parser = make_parser(
        __doc__, f"{QUICK_PER_CATEGORY} questions per category, not {FULL_PER_CATEGORY}"
    )
    parser.add_argument("--concurrency", type=int, default=8, help="requests at once")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args()
    import torch

    # on a shared 2-core machine more threads than free cores spin and run ~10x slower
    torch.set_num_threads(args.threads)
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    per_category = QUICK_PER_CATEGORY if args.quick else FULL_PER_CATEGORY
    wheel = fetch_bfcl_wheel()
    everything = {c: load_items(wheel, c) for c in (*CALL_CATEGORIES, "irrelevance")}
    items = {c: spread(found, per_category) for c, found in everything.items()}
    agent_count = QUICK_AGENT_RUNS if args.quick else FULL_AGENT_RUNS
    # the agent runs take other questions than the ones measured above, from each category
    # (`--quick`: from simple only, whose calls are the shortest to decode)
    categories = ("simple",) if args.quick else CALL_CATEGORIES
    pool = [i for c in categories for i in everything[c][1::7]]
    agent_items = spread(pool, agent_count)
    home = cached_model_home()
    progress("model imported; serving it")
    started = time.perf_counter()
    with serving(home, args.concurrency) as url:
        progress("server ready")
        figures = measure(url, items, agent_items, args.concurrency, args.quick)
    figures["wall_s"] = time.perf_counter() - started
    print(f"SmolLM2-135M-Instruct on BFCL ({wheel.name}), {per_category} per category")
    print_table(figures)
    print("AST check: BFCL's rules written plainly (benchmarks/_bfcl_ast.py)")
    print(f"wall time: {figures['wall_s']:.0f} s")
    print_json(
        args,
        {"quick": args.quick, "per_category": per_category, "concurrency": args.concurrency}
        | figures,
    )


if __name__ == "__main__":
    main()
