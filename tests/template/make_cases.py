#!/usr/bin/env python3
"""Writes cases.json: the conversations and inline templates the template tests render.

Run it after editing the cases, then `node tests/template/make_expected.mjs` to refresh the
reference outputs.
"""
import json
import os
Q3, Q2, Q35 = "qwen3", "qwen2", "qwen35"
tools = [
  {"type": "function", "function": {"name": "get_weather", "description": "Get the weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "search", "description": "Search the web: \"quoted\" & <tags> \\ backslash",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}, "limit": {"type": "integer", "default": 10}}}}},
]
U = lambda c: {"role": "user", "content": c}
A = lambda c, **kw: dict({"role": "assistant", "content": c}, **kw)
S = lambda c: {"role": "system", "content": c}
T = lambda c, **kw: dict({"role": "tool", "content": c}, **kw)
def call(name, args, cid=None):
  d = {"type": "function", "function": {"name": name, "arguments": args}}
  if cid: d["id"] = cid
  return d
cases = []
def add(name, tpl, ctx): cases.append({"name": name, "template": tpl, "context": ctx})

add("q3_single_user", Q3, {"messages": [U("Hello!")], "add_generation_prompt": True})
add("q3_system_user", Q3, {"messages": [S("You are terse."), U("Hi")], "add_generation_prompt": True})
add("q3_system_user_no_gen", Q3, {"messages": [S("You are terse."), U("Hi")], "add_generation_prompt": False})
add("q3_multi_turn", Q3, {"messages": [U("What is 2+2?"), A("4"), U("And 3+3?")], "add_generation_prompt": True})
add("q3_thinking_off", Q3, {"messages": [U("Quick answer please")], "add_generation_prompt": True, "enable_thinking": False})
add("q3_thinking_on", Q3, {"messages": [U("Think hard")], "add_generation_prompt": True, "enable_thinking": True})
add("q3_thinking_off_no_gen", Q3, {"messages": [U("x"), A("y")], "add_generation_prompt": False, "enable_thinking": False})
add("q3_tools", Q3, {"messages": [U("Weather in Paris?")], "tools": tools, "add_generation_prompt": True})
add("q3_tools_system", Q3, {"messages": [S("Be helpful."), U("Weather in Paris?")], "tools": tools, "add_generation_prompt": True})
add("q3_tool_call_object_args", Q3, {"messages": [U("Weather in Paris?"),
  A("", tool_calls=[call("get_weather", {"city": "Paris", "unit": "celsius"}, "c1")]),
  T("{\"temp\": 21}", tool_call_id="c1")], "tools": tools, "add_generation_prompt": True})
add("q3_tool_call_string_args", Q3, {"messages": [U("Weather in Paris?"),
  A("Let me check.", tool_calls=[call("get_weather", "{\"city\": \"Paris\"}")]),
  T("sunny")], "tools": tools, "add_generation_prompt": True})
add("q3_two_calls_consecutive_results", Q3, {"messages": [U("Weather in Paris and Rome?"),
  A("", tool_calls=[call("get_weather", {"city": "Paris"}), call("get_weather", {"city": "Rome"})]),
  T("Paris: 21C"), T("Rome: 25C"), A("Paris 21C, Rome 25C.")], "tools": tools, "add_generation_prompt": False})
add("q3_reasoning_past_turn", Q3, {"messages": [U("Q1"), A("A1", reasoning_content="I thought about Q1."), U("Q2")],
  "add_generation_prompt": True})
add("q3_reasoning_in_tool_loop", Q3, {"messages": [U("Weather?"),
  A("", reasoning_content="Need the tool.", tool_calls=[call("get_weather", {"city": "Oslo"})]),
  T("cold"), A("It is cold.", reasoning_content="\nTool said cold.\n")], "tools": tools, "add_generation_prompt": False})
add("q3_think_in_content_last", Q3, {"messages": [U("Hi"), A("<think>\nplanning the reply\n</think>\n\nHello there!")],
  "add_generation_prompt": False})
add("q3_think_in_content_past", Q3, {"messages": [U("Hi"), A("<think>\nold plan\n</think>\n\nHello!"), U("Bye")],
  "add_generation_prompt": True})
add("q3_content_parts_error", Q3, {"messages": [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}],
  "add_generation_prompt": True})
add("q3_unicode_and_json_special", Q3, {"messages": [
  U("Ünïcödé ✓ 日本語 🚀 emoji, \"quotes\", back\\slash, tab\tand\nnewline </tool_call>"),
  A("", tool_calls=[call("search", {"q": "caf\u00e9 \"x\" \\ \n 🚀 </tool_call>", "limit": 5})]),
  T("résultat: «ok» 🚀")], "tools": tools, "add_generation_prompt": True})
add("q3_numbers_in_args", Q3, {"messages": [U("n"),
  A("", tool_calls=[call("search", {"ints": [0, -3, 42], "floats": [1.5, 2.0, -0.25, 1e-7, 1e21, 123456789.125],
     "flags": [True, False, None], "nested": {"a": {"b": []}, "e": {}}})])], "add_generation_prompt": False})
add("q3_empty_content_tool_call_no_gen", Q3, {"messages": [U("Do it"),
  A("", tool_calls=[call("search", {"q": "x"})])], "add_generation_prompt": False})
add("q3_final_answer_after_tools", Q3, {"messages": [S("sys"), U("Weather?"),
  A("Checking", tool_calls=[call("get_weather", "{\"city\":\"Rome\"}")]), T("hot"), A("It is hot in Rome.")],
  "tools": tools, "add_generation_prompt": False})
add("q3_tool_response_as_user", Q3, {"messages": [U("real question"), A("calling"),
  U("<tool_response>\nresult\n</tool_response>"), A("done")], "add_generation_prompt": True})
add("q3_system_only", Q3, {"messages": [S("Only a system prompt.")], "add_generation_prompt": True})
add("q3_null_content_error", Q3, {"messages": [U("x"), {"role": "assistant", "content": None,
  "reasoning_content": "r", "tool_calls": [call("search", {"q": "y"})]}], "add_generation_prompt": False})
add("q3_extra_kwargs_ignored", Q3, {"messages": [U("Hi")], "add_generation_prompt": True, "custom_flag": True,
  "bos_token": "<s>", "eos_token": "<|im_end|>"})
add("q3_whitespace_around_think", Q3, {"messages": [U("Hi"),
  A("<think>  \n  spaced reasoning  \n\n</think>\n\n   answer with leading spaces  ")], "add_generation_prompt": False})
add("q3_reasoning_whitespace", Q3, {"messages": [U("Hi"), A(" \n answer", reasoning_content="  \n\tpadded thought \n ")],
  "add_generation_prompt": False})
add("q3_tool_first_message", Q3, {"messages": [T("orphan result"), U("Hi")], "add_generation_prompt": True})
add("q3_system_in_middle", Q3, {"messages": [U("Hi"), S("late system"), U("again")], "add_generation_prompt": True})
add("q3_long_multi_turn", Q3, {"messages": [S("s"), U("u1"), A("a1"), U("u2"), A("<think>t2</think>a2"), U("u3"),
  A("", tool_calls=[call("get_weather", {"city": "Lima"})]), T("warm"), A("a3", reasoning_content="r3")],
  "tools": tools[:1], "add_generation_prompt": True, "enable_thinking": False})

for tpl in (Q2, Q35):
  add(f"{tpl}_default_system", tpl, {"messages": [U("Hello")], "add_generation_prompt": True})
  add(f"{tpl}_own_system", tpl, {"messages": [S("Custom."), U("Hello")], "add_generation_prompt": True})
  add(f"{tpl}_multi_turn_no_gen", tpl, {"messages": [U("a"), A("b"), U("c"), A("d")], "add_generation_prompt": False})
  add(f"{tpl}_unicode", tpl, {"messages": [U("日本語 🚀 \"q\" \\ \n")], "add_generation_prompt": True})
  add(f"{tpl}_content_parts", tpl, {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "there"}]}],
    "add_generation_prompt": True})
  add(f"{tpl}_tool_role", tpl, {"messages": [U("q"), A("calling"), T("result")], "add_generation_prompt": True})

# Engine cases: inline templates exercising constructs, each checked against the reference too.
E = [
  ("loop_vars", "{% for x in xs %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }};{% endfor %}", {"xs": ["a", "b", "c"]}),
  ("for_else_and_filter", "{% for x in xs if x > 1 %}{{ x }},{% else %}none{% endfor %}|{% for y in [] %}{{ y }}{% else %}empty{% endfor %}", {"xs": [1, 2, 3]}),
  ("for_dict_and_items", "{% for k in d %}{{ k }};{% endfor %}{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d|items %}{{ k }}:{{ v }}{% endfor %}", {"d": {"b": 1, "a": [1, 2], "2": "num", "1": True}}),
  ("namespace_set", "{% set ns = namespace(n=0, s='') %}{% for i in range(5) %}{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}{% set local = i %}{% endfor %}{{ ns.n }} {{ ns.s }} {{ local is defined }}", {}),
  ("block_set", "{% set x %}  hello {{ name }}  {% endset %}[{{ x }}]{{ x | trim | upper }}", {"name": "bob"}),
  ("macro_defaults_kwargs", "{% macro f(a, b='B', c=none) %}{{ a }}-{{ b }}-{{ c }}{% endmacro %}{{ f(1) }}|{{ f(1, 2) }}|{{ f('x', c=3) }}", {}),
  ("macro_call_caller", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}inner {{ v }}{% endcall %}", {"v": 7}),
  ("whitespace_control", "a  \n  {%- if true -%}  \n  b  \n  {%- endif -%}  \n  c\n{# comment #}\n  {% if true %}\nd\n  {% endif %}\ne {{- ' f ' -}} g\n", {}),
  ("lstrip_trim_blocks", "line1\n    {% if x %}\n    inside\n    {% endif %}\nline2\n  {{ x }}\n  {# c #}\nend\n", {"x": 1}),
  ("tojson_variants", "{{ d | tojson }}\n{{ d | tojson(indent=2) }}\n{{ d | tojson(ensure_ascii=true) }}\n{{ d | tojson(sort_keys=true) }}\n{{ d | tojson(separators=(',', ':')) }}\n{{ [] | tojson(indent=2) }}{{ {} | tojson(indent=4) }}", {"d": {"z": "é🚀\u007f", "a": [1, 2.5, None, True, {"x": "\n\t\"\\"}], "B": {}}}),
  ("printing_values", "{{ 1 }} {{ 1.0 }} {{ 2.5 }} {{ true }} {{ none }} {{ [1, 'a', none, 2.0] }} {{ {'k': 1} }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 1.0 if false else 0.1 + 0.2 }} {{ 1/3 }} {{ 100000000000000000000000.0 }} {{ 123456789012345678901234 }} {{ 0.000001 }} {{ -0.0 }}", {}),
  ("string_methods", "{{ s.upper() }}|{{ s.lower() }}|{{ s.title() }}|{{ s.capitalize() }}|{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ s.split() }}|{{ s.split('o') }}|{{ s.split('o', 1) }}|{{ s.split(none, 1) }}|{{ s.replace('o', '0') }}|{{ s.replace('o', '0', 1) }}|{{ s.startswith('  he') }}|{{ s.endswith(('x', 'd  ')) }}", {"s": "  hello wOrld  "}),
  ("slicing", "{{ xs[::-1] }} {{ xs[1:] }} {{ xs[:-1] }} {{ xs[::2] }} {{ xs[-1] }} {{ s[1:] }} {{ s[::-1] }} {{ s[0] }} {{ s[-2:] }}", {"xs": [1, 2, 3, 4, 5], "s": "héllo"}),
  ("filters_misc", "{{ xs|length }} {{ xs|first }} {{ xs|last }} {{ xs|join(', ') }} {{ xs|reverse|list }} {{ xs|sort }} {{ names|unique|join }} {{ 'abc'|length }} {{ '42'|int + 1 }} {{ '2.5'|float }} {{ 3.7|int }} {{ -3|abs }} {{ 5|string ~ 'x' }} {{ true|string }} {{ undefined_var|default('dflt') }} {{ ''|default('e', true) }} {{ 'a\nb\n\nc'|indent }} {{ 'a\nb'|indent(2, true) }}", {"xs": [3, 1, 2], "names": ["a", "b", "a"]}),
  ("selectattr_map", "{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='content')|join('+') }} {{ ms|rejectattr('role', 'equalto', 'user')|list|length }} {{ ms|selectattr('flag')|map(attribute='content')|list }} {{ ms|map(attribute='x.y', default='-')|list }}", {"ms": [{"role": "user", "content": "u1", "flag": True}, {"role": "assistant", "content": "a1", "x": {"y": 9}}, {"role": "user", "content": "u2"}]}),
  ("tests", "{{ x is defined }} {{ y is undefined }} {{ n is none }} {{ s is string }} {{ d is mapping }} {{ l is sequence }} {{ l is iterable }} {{ i is number }} {{ f is number }} {{ t is true }} {{ t is false }} {{ i is integer }} {{ 3 is odd }} {{ 4 is even }} {{ s is not string }} {{ 'ell' in s }} {{ 2 in l }} {{ 'k' in d }} {{ 'z' not in d }} {{ 'q' in undefined_thing }}", {"x": 1, "n": None, "s": "hello", "d": {"k": 1}, "l": [1, 2], "i": 3, "f": 1.5, "t": True}),
  ("operators", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 'a' ~ 1 ~ none is none }} {{ 'a' + 'b' }} {{ [1] + [2] }} {{ 1 < 2 and 2 < 3 }} {{ not 1 == 1 }} {{ 1 != 2 or x }} {{ 'yes' if 0 else 'no' }} {{ 5 - -3 }} {{ 10 / 4 }} {{ 1 == 1.0 }} {{ '1' == 1 }} {{ none == undefined_x }}", {}),
  ("dict_methods", "{{ d.get('a') }} {{ d.get('zz', 'fallback') }} {{ d.get('zz') }} {{ d.keys()|list }} {{ d.values()|list }} {{ d['a'] }} {{ d.a }} {{ d.missing }}|{{ d|dictsort }} {{ d|length }}", {"d": {"b": 2, "a": 1}}),
  ("literals", "{% set t = (1, 'two', [3]) %}{{ t|length }} {{ t[1] }} {{ t[2] }} {{ {'a': [1, {'b': none}], 'c': [1, 2]} }} {{ [] }} {{ {} }} {{ 'con' 'cat' }} {{ \"dq\\u00e9\\x41\" }}", {}),
  ("break_continue", "{% for i in range(10) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 4 %}x{% break %}{% endif %}{{ i }},{% endfor %}", {}),
  ("strftime_literal_percent", "{{ strftime_now('%%') }}", {}),
  ("raise_exception", "{% if true %}{{ raise_exception('Conversation roles must alternate') }}{% endif %}", {}),
  ("undefined_method_error", "{{ x.foo() }}", {"x": 1}),
  ("compare_strings_error", "{{ 'a' < 'b' }}", {}),
  ("set_tuple_unpack", "{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set c = 1, 2 %}{{ c }}", {}),
  ("filter_block_and_generation", "{% filter upper %}shout {{ 'it' }}{% endfilter %}\n{% generation %}gen {% endgeneration %}after", {}),
  ("macro_varargs_kwargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k='v') }}", {}),
  ("nested_loops_loop_shadow", "{% for a in [1, 2] %}{% for b in ['x', 'y'] %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}", {}),
  ("if_elif_else", "{% for v in [0, 1, 2, 3] %}{% if v == 0 %}zero{% elif v == 1 %}one{% elif v == 2 %}two{% else %}many{% endif %},{% endfor %}", {}),
]
for name, tpl, ctx in E:
  add("engine_" + name, {"inline": tpl}, ctx)
json.dump({"cases": cases}, open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases.json"), "w", encoding="utf-8"), ensure_ascii=False, indent=1)
print(len(cases), sum(1 for c in cases if c["template"] == Q3))
