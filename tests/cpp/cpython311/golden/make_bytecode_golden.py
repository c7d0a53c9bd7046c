#!/usr/bin/env python3
"""Regenerates tests/cpp/cpython311/golden/bytecode.txt for assembler_test.cpp.

Each case is a source in the subset of Note [Direct bytecode]; the expected
code object is whatever CPython 3.11's compile() produces for it.  Refused
cases are sources the assembler must hand back to compile(), each with the
name of its Refusal code (refusal_name() in src/backends/cpython311/assembler.h).
tests/python/test_direct_bytecode.py imports ACCEPTED and REFUSED too.
Run with /usr/bin/python3 (CPython 3.11):
    /usr/bin/python3 tests/cpp/cpython311/golden/make_bytecode_golden.py
"""
import os
import struct
import sys
import types

assert sys.version_info[:2] == (3, 11), "the golden file records CPython 3.11 bytecode"
HERE = os.path.dirname(os.path.abspath(__file__))


def fn(body, params="self, a, b", lead="\n\n\n", ret=""):
    return (lead + f"def forward({params}){ret}:\n" + "".join("    " + line + "\n" for line in body) + "    ")


def args(n, item="a"):
    return ", ".join(item.format(i=i) for i in range(n))


ACCEPTED = {
    "binary_chain": fn(["add = a + 1;  a = None", "conjugate = add.conjugate();  add = None",
                        "mul = conjugate * b;  conjugate = b = None", "neg = -mul;  mul = None", "return neg"]),
    "calls": fn(["relu = torch.relu(a, inplace = False);  a = None",
                 "view = relu.view(1, -1, k = (2, 3));  relu = None",
                 "g = getattr(self.layer1, \"0\")(view, [1, 2, 3], [view, 2], (view, 1.5), {'a': view})",
                 "d = f(g, {'a': g, 'b': 2}, {}, [], (), {'a': 1, 'b': 2}, {1: g})",
                 "return (d, None)"]),
    "subscripts": fn(["s = a[(slice(None, 2, None), 0)]", "t = a[0, 1]", "u = b[...]", "v = b[-1]",
                      "return [s, t, u, v]"]),
    "operators": fn(["x = a // b % 2 @ a ** b ** 2", "y = (a + b) * -a", "z = a << 1 >> b & a | b ^ ~a",
                     "c = a != b;  e = a >= 1.5e-05", "return (x, y, z, c, e)"]),
    "constants": fn(["x = a(1, -2, 3.0, -0.0, 0.0, 1e300, True, False, None, ..., 'a\\x00\\n\\'\\u00e9', \"it's\")",
                     "y = [1, 1.0, True];  z = (a, (1, 2), [3, (4,)])", "return (x, y, z, 9223372036854775807)"]),
    "globals_and_attrs": fn(["u = torch.float32;  w = inf", "v = f(dtype = torch.float32, device = device(type = 'cpu'))",
                             "m = self.a.b.c(u);  n = f(a)(b);  o = (a).view(-1)", "return m"]),
    "chained_frees": fn(["x = a;  a = x = None", "t : torch.Tensor = b + 1", "f(t)", "return t"]),
    "return_forms_const": fn(["return (1, 2)"]),
    "return_forms_none": fn(["return"]),
    "return_forms_bare_tuple": fn(["return a, b"]),
    "header": fn(["return x"], params="self, x : torch.Tensor, y = 1.5, z : int = 2", ret=" -> torch.Tensor"),
    "comments_and_gaps": fn(["x = a.view(1, k = 2)", "# a comment", "", "", "", "y = x + 1  # trailing", "return y"]),
    "line_gaps": fn(["x = a + 1", "", "y = x + 1", "", "", "z = y", "return z"]),
    "prologue": "\ntorch.fx._symbolic_trace.wrap(\"len\")\n\n" + fn(["return len(a)"], lead=""),
    "long_line": fn(["x = f(" + args(25, "a") + ");  " + "y = g(" + args(20, "'s{i}'") + ")", "return (x, y)"]),
    "many_locals": "def f(a):\n" + "".join(f"    x{i} = a + {i}\n" for i in range(300)) + "    return x299\n",
    "method_args_29": fn([f"x = a.view({args(29)})", "return x"]),
    "method_args_30": fn([f"x = a.view({args(30)})", "return x"]),  # PUSH_NULL + LOAD_ATTR
    "call_args_30": fn([f"x = f({args(30)})", "return x"]),
    "method_kwargs_14": fn([f"x = a.view({args(14, 'k{i} = a')})", "return x"]),
    "list_30": fn([f"x = torch.cat([{args(30)}])", "return x"]),
    "list_31": fn([f"x = torch.cat([{args(31)}])", "return x"]),
    "tuple_31": fn([f"x = f(({args(31)}))", "return x"]),
    "const_list_40": fn([f"x = f([{args(40, '{i}')}])", "return x"]),
    "dict_15": fn([f"x = f({{{args(15, chr(39) + 'k{i}' + chr(39) + ': a')}}})", "return x"]),
    "identity_and_membership": fn(["x = a is b;  y = a is not None;  z = a in b;  w = a not in (1, 2)",
                                   "v = (a is True) == (b in a)", "return (x, y, z, w, v)"]),
    "many_names": fn([f"y{j} = torch.t{j}" for j in range(300)] + ["return y299"]),
    # an expression statement's POP_TOP takes the location of the instruction before it
    "expression_statements": fn(["(a)", "(a).b", "f(a)", "(f)(b)", "(a, b)", "return a"]),
    "subscripts_compile_takes_quietly": fn(["x = 'ab'[a];  y = (a, b)[a];  z = [a, b][0];  w = a[1.5]",
                                            "v = {'k': a}['k'];  u = (1, 2)[a];  t = a[(1, 'k')]", "return x"]),
    "chained_store_300": fn([" = ".join(f"x{j}" for j in range(300)) + " = a", "return x299"]),
}

REFUSED = {
    "folded_binop": (fn(["x = 1 + 2", "return x"]), "folded_constant"),
    "folded_subscript": (fn(["x = (1, 2)[0]", "return x"]), "folded_constant"),
    "constant_statement": (fn(["1", "return a"]), "folded_constant"),
    "in_list_display": (fn(["x = a in [a, b]", "return x"]), "folded_constant"),
    "method_args_31": (fn([f"x = a.view({args(31)})", "return x"]), "too_many_call_args"),
    "call_kwargs": (fn([f"x = f(a, {args(15, 'k{i} = a')})", "return x"]), "too_many_call_args"),
    "dict_16": (fn([f"x = f({{{args(16, chr(39) + 'k{i}' + chr(39) + ': a')}}})", "return x"]), "dict_too_large"),
    "big_int": (fn(["x = 9223372036854775808", "return x"]), "literal"),
    "string_prefix": (fn(["x = f(b'x')", "return x"]), "literal"),
    "star_params": (fn(["return args"], params="self, *args"), "star_args"),
    "star_call": (fn(["return f(*a)"]), "star_args"),
    "duplicate_params": (fn(["return a"], params="a, a"), "bad_parameters"),
    "import_prologue": ("import torch\n" + fn(["return a"], lead=""), "imports_before_def"),
    "decorated": ("@dec\n" + fn(["return a"], lead=""), "prologue"),
    "tuple_unpack": (fn(["a, b, = f(a)", "return a"]), "syntax"),
    # a syntax error: compile() must be the one to report it
    "keyword_argument": (fn(["x = f(a, if = a)", "return x"]), "syntax"),
    "no_def": ("x = 1\n", "no_function"),
    "no_return": (fn(["x = a"]), "no_return"),
    "code_after_return": (fn(["return a", "x = a"]), "code_after_return"),
    "tab": (fn(["return a"]).replace("    return", "\treturn"), "whitespace"),
    "chained_comparison": (fn(["x = a < b < 1", "return x"]), "construct"),
    "chained_identity": (fn(["x = a is b is None", "return x"]), "construct"),
    "is_literal": (fn(["x = a is 1", "return x"]), "construct"),   # compile() warns
    "boolean_operator": (fn(["x = a and b", "return x"]), "construct"),
    "not_operator": (fn(["x = not a", "return x"]), "construct"),
    "slice_syntax": (fn(["x = a[1:2]", "return x"]), "construct"),
    "augmented": (fn(["a += 1", "return a"]), "construct"),
    "two_defs": (fn(["return a"]) + "\ndef g():\n    return 1\n", "body_shape"),
    # compile() warns (SyntaxWarning, "perhaps you missed a comma?") or raises
    "call_of_literal": (fn(["x = f(a, 1(b))", "return x"]), "construct"),
    "call_of_display": (fn(["x = [a](b)", "return x"]), "construct"),
    "subscript_of_number": (fn(["x = 1[a]", "return x"]), "construct"),
    "index_not_int": (fn(["x = [a, b]['k']", "return x"]), "construct"),
    "str_index_tuple": (fn(["x = 'ab'[(a, b)]", "return x"]), "construct"),
    "keyword_function_name": ("def for(a):\n    return a\n", "syntax"),
    "repeated_keyword": (fn(["x = f(k = a, k = b)", "return x"]), "syntax"),
    "nested_block": (fn(["if a:", "    return b", "return a"]), "construct"),
}


def const_text(c):
    if c is None:
        return "None"
    if c is Ellipsis:
        return "..."
    if isinstance(c, bool):
        return "True" if c else "False"
    if isinstance(c, int):
        return f"i{c}"
    if isinstance(c, float):
        return "f" + struct.pack("<d", c).hex()
    if isinstance(c, str):
        return "s" + c.encode().hex()
    if isinstance(c, tuple):
        return "(" + ",".join(const_text(x) for x in c) + ")"
    raise TypeError(type(c))


def main():
    out = []
    for name, src in ACCEPTED.items():
        module = compile(src, "<golden>", "exec")
        code = next(c for c in module.co_consts if isinstance(c, types.CodeType))
        out.append(f"@@ accept {name}\n{src}\n@@ want\n")
        out.append(f"code {code.co_code.hex()}\nlinetable {code.co_linetable.hex()}\n")
        out.append(f"consts {' '.join(const_text(c) for c in code.co_consts)}\n")
        out.append(f"names {' '.join(code.co_names)}\nvarnames {' '.join(code.co_varnames)}\n")
        out.append(f"stacksize {code.co_stacksize}\nfirst_line {code.co_firstlineno}\n")
        out.append(f"argcount {code.co_argcount}\n")
    for name, (src, reason) in REFUSED.items():
        out.append(f"@@ refuse {name}\n{src}\n@@ reason {reason}\n")
    out.append("@@ end\n")
    with open(os.path.join(HERE, "bytecode.txt"), "w") as f:
        f.write("".join(out))


if __name__ == "__main__":
    main()
