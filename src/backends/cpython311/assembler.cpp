// CPython 3.11 bytecode for the straight-line subset codegen writes.
// See Note [Direct bytecode] in assembler.h.  Every rule below names the
// CPython 3.11 behaviour it reproduces; the Python test suite checks the
// result against compile() for every generated program it runs.
#include "assembler.h"

#include <charconv>
#include <climits>
#include <cstdint>
#include <cstring>
#include <unordered_map>

namespace fxcpp::cpython311 {
namespace {

// CPython 3.11 opcode numbers (Lib/opcode.py) and inline cache sizes
// (opcode._inline_cache_entries).
enum Op : uint8_t {
  CACHE = 0,
  POP_TOP = 1,
  PUSH_NULL = 2,
  UNARY_POSITIVE = 10,
  UNARY_NEGATIVE = 11,
  UNARY_INVERT = 15,
  BINARY_SUBSCR = 25,
  LIST_TO_TUPLE = 82,
  RETURN_VALUE = 83,
  LOAD_CONST = 100,
  BUILD_TUPLE = 102,
  BUILD_LIST = 103,
  BUILD_MAP = 105,
  LOAD_ATTR = 106,
  COMPARE_OP = 107,
  IS_OP = 117,
  CONTAINS_OP = 118,
  LOAD_GLOBAL = 116,
  COPY = 120,
  BINARY_OP = 122,
  LOAD_FAST = 124,
  STORE_FAST = 125,
  EXTENDED_ARG = 144,
  LIST_APPEND = 145,
  RESUME = 151,
  BUILD_CONST_KEY_MAP = 156,
  LOAD_METHOD = 160,
  LIST_EXTEND = 162,
  PRECALL = 166,
  CALL = 171,
  KW_NAMES = 172,
};

int cache_entries(uint8_t op) {
  switch (op) {
    case BINARY_OP:
    case PRECALL:
      return 1;
    case COMPARE_OP:
      return 2;
    case BINARY_SUBSCR:
    case LOAD_ATTR:
    case CALL:
      return 4;
    case LOAD_GLOBAL:
      return 5;
    case LOAD_METHOD:
      return 10;
    default:
      return 0;
  }
}

// compile.c's STACK_USE_GUIDELINE: bigger displays and calls change shape.
constexpr int kStackUseGuideline = 30;

// BINARY_OP opargs (opcode._nb_ops).
enum NbOp : uint8_t {
  NB_ADD = 0, NB_AND = 1, NB_FLOOR_DIVIDE = 2, NB_LSHIFT = 3, NB_MATRIX_MULTIPLY = 4, NB_MULTIPLY = 5,
  NB_REMAINDER = 6, NB_OR = 7, NB_POWER = 8, NB_RSHIFT = 9, NB_SUBTRACT = 10, NB_TRUE_DIVIDE = 11, NB_XOR = 12,
};

// COMPARE_OP opargs: indexes into opcode.cmp_op.
enum CmpOp : uint8_t { CMP_LT = 0, CMP_LE = 1, CMP_EQ = 2, CMP_NE = 3, CMP_GT = 4, CMP_GE = 5 };

// IS_OP and CONTAINS_OP opargs: the invert flag (`is not`, `not in`).
enum InvertFlag : uint8_t { NOT_INVERTED = 0, INVERTED = 1 };

// Location table entry codes of CPython 3.11 (Objects/locations.md); an
// entry's first byte is 0x80 | code << 3 | (code units - 1).
enum LocationCode : uint8_t {
  LOC_SHORT_0 = 0,           // 0-9: same line, column group = code, 1 byte (col % 8, length)
  LOC_SHORT_LAST = 9,
  LOC_ONE_LINE_0 = 10,       // 10-12: line delta code - 10, then column and end column bytes
  LOC_ONE_LINE_2 = 12,
  LOC_NO_COLUMN = 13,        // line delta as signed varint, no columns
  LOC_LONG = 14,             // line delta, end line delta, column + 1, end column + 1 (varints)
  LOC_NONE = 15,             // no location
};
// The most code units one entry covers.
constexpr int kMaxUnitsPerEntry = 8;

// The first byte of a location entry.
char location_header(LocationCode code, int units) {
  return static_cast<char>(0x80 | (code << 3) | (units - 1));
}
struct Refused {
  Refusal reason;
  std::string detail;
};

[[noreturn]] void refuse(Refusal reason, std::string detail) { throw Refused{reason, std::move(detail)}; }

bool is_keyword(std::string_view s) {
  if (s.size() < 2 || s.size() > 8) return false;
  static const char* const kKeywords[] = {
      "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else",
      "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not",
      "or", "pass", "raise", "return", "try", "while", "with", "yield", "None", "True", "False"};
  for (const char* k : kKeywords)
    if (s[0] == k[0] && s == k) return true;
  return false;
}

// ------------------------------------------------------------------------------
// Syntax tree of one statement.  Spans are byte columns on the statement's line
// (everything the subset contains is on one line).
// ------------------------------------------------------------------------------

enum class EK : uint8_t { Name, Const, Attribute, Call, BinOp, Unary, Compare, Subscript, Tuple, List, Dict };

struct Expr {
  EK kind = EK::Name;
  uint8_t op = 0;          // BinOp: NbOp; Unary: opcode; Compare: the oparg
  uint8_t cmp_opcode = 0;  // Compare: COMPARE_OP, IS_OP or CONTAINS_OP
  int col = 0, end = 0;    // the node's span
  std::string_view id;     // Name, Attribute: the identifier
  int sym = -1;            // Name, Attribute: its interned symbol
  int a = -1;              // Const: index into consts_; others: first child
  int kids = 0;            // children in kids_ from `first`
  int first = 0;
  int nkw = 0;             // Call: the last nkw children are keyword values
  int kw_first = 0;        // Call: keyword names in kwnames_
};

// A parsed expression: the node, and the text span including any parentheses
// around it (a parent's span starts and ends there, as in CPython's parser).
struct P {
  int node;
  int start, stop;
};

struct Target {
  std::string_view name;
  int col, end;
};

struct Stmt {
  enum class K : uint8_t { Assign, Return, Expr } kind;
  int line;
  int col, end;
  int value = -1;     // root expression, -1 for a bare `return`
  int targets = 0;    // Assign: targets in targets_ from target_first
  int target_first = 0;
};

class Assembler {
 public:
  explicit Assembler(std::string_view src) : src_(src) {}

  void run(AssembledFunction& out);

 private:
  // ---- lexing -----------------------------------------------------------------
  std::string_view src_;
  std::string_view line_;  // the current physical line
  int line_no_ = 0;
  size_t pos_ = 0;         // byte offset in line_

  void skip_space() {
    while (pos_ < line_.size() && line_[pos_] == ' ') ++pos_;
    if (pos_ < line_.size() && line_[pos_] == '#') pos_ = line_.size();
  }
  bool at_end() {
    skip_space();
    return pos_ >= line_.size();
  }
  template <size_t N>
  bool peek(const char (&tok)[N]) {
    skip_space();
    constexpr size_t n = N - 1;
    if (pos_ >= line_.size() || line_[pos_] != tok[0]) return false;
    if (n > 1 && line_.compare(pos_, n, tok) != 0) return false;
    // an operator token must not be the prefix of a longer one
    if (n == 1 && pos_ + 1 < line_.size()) {
      char c = tok[0], d = line_[pos_ + 1];
      if ((c == '*' && d == '*') || (c == '/' && d == '/') || (c == '<' && (d == '<' || d == '=')) ||
          (c == '>' && (d == '>' || d == '=')) || (c == '=' && d == '=') || (c == '-' && d == '>'))
        return false;
      if (d == '=' && std::strchr("+-*/%@&|^", c)) refuse(Refusal::kConstruct, "augmented assignment");
    }
    if (n == 2 && pos_ + 2 < line_.size() && line_[pos_ + 2] == '=' && (!std::strcmp(tok, "**") ||
        !std::strcmp(tok, "//") || !std::strcmp(tok, "<<") || !std::strcmp(tok, ">>")))
      refuse(Refusal::kConstruct, "augmented assignment");
    return true;
  }
  template <size_t N>
  bool accept(const char (&tok)[N]) {
    if (!peek(tok)) return false;
    pos_ += N - 1;
    return true;
  }
  template <size_t N>
  void expect(const char (&tok)[N]) {
    if (!accept(tok)) refuse(Refusal::kSyntax, std::string("expected '") + tok + "'");
  }
  static bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
  static bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9'); }
  bool peek_name() {
    skip_space();
    return pos_ < line_.size() && name_start(line_[pos_]);
  }
  std::string_view take_name(int* col = nullptr) {
    skip_space();
    size_t b = pos_;
    if (b >= line_.size() || !name_start(line_[b])) refuse(Refusal::kSyntax, "expected a name");
    while (pos_ < line_.size() && name_char(line_[pos_])) ++pos_;
    if (pos_ < line_.size() && (static_cast<unsigned char>(line_[pos_]) >= 0x80 || line_[pos_] == '\'' ||
                                line_[pos_] == '"'))
      refuse(Refusal::kLiteral, "non-ASCII name or prefixed string");
    if (col) *col = static_cast<int>(b);
    return line_.substr(b, pos_ - b);
  }
  template <size_t N>
  bool peek_keyword(const char (&kw)[N]) {
    skip_space();
    constexpr size_t n = N - 1;
    return pos_ < line_.size() && line_[pos_] == kw[0] && line_.compare(pos_, n, kw) == 0 &&
           (pos_ + n >= line_.size() || !name_char(line_[pos_ + n]));
  }
  // whether the next token is a name (keywords included)
  bool next_is_word() {
    skip_space();
    return pos_ < line_.size() && name_start(line_[pos_]);
  }

  // ---- trees ------------------------------------------------------------------------
  std::vector<Expr> exprs_;
  std::vector<int> kids_;
  std::vector<std::string_view> kwnames_;
  std::vector<Constant> pool_;  // constants as written, before interning
  std::vector<Target> targets_;
  std::vector<int> scratch_;

  int add_expr(EK k, int col, int end) {
    exprs_.emplace_back();
    Expr& e = exprs_.back();
    e.kind = k;
    e.col = col;
    e.end = end;
    return static_cast<int>(exprs_.size()) - 1;
  }
  int add_const(Constant c, int col, int end) {
    pool_.push_back(std::move(c));
    int i = add_expr(EK::Const, col, end);
    exprs_[i].a = static_cast<int>(pool_.size()) - 1;
    return i;
  }
  void set_kids(int e, size_t mark) {
    exprs_[e].first = static_cast<int>(kids_.size());
    exprs_[e].kids = static_cast<int>(scratch_.size() - mark);
    kids_.insert(kids_.end(), scratch_.begin() + static_cast<long>(mark), scratch_.end());
    scratch_.resize(mark);
  }
  bool is_const(int e) const { return exprs_[e].kind == EK::Const; }
  const Constant& const_of(int e) const { return pool_[static_cast<size_t>(exprs_[e].a)]; }

  // ---- parsing ----------------------------------------------------------------------
  P parse_atom();
  P parse_primary();
  P parse_power();
  P parse_factor();
  P parse_binary(int level);
  P parse_expr();
  P parse_expr_list();   // `a, b` forms an unparenthesized tuple
  P parse_sequence(char close, int open_col, EK kind);
  P parse_dict(int open_col);
  P parse_number();
  P parse_string();
  P make_tuple(size_t mark, int col, int end);
  P make_pair(EK kind, uint8_t op, const P& left, const P& right, int stop);
  bool subscript_warns(int value, int index) const;
  void parse_call(P& p);
  void parse_statement();
  void parse_header(AssembledFunction& out);

  // ---- emission ---------------------------------------------------------------------
  // Instructions naming an identifier keep the symbol until the end, when
  // every local is known (Note [Direct bytecode]: a name is local when the
  // function assigns it anywhere, as CPython's symtable decides).
  enum class Ref : uint8_t { None, Load, Attr, Store };
  struct Instr {
    uint8_t op;
    Ref ref;
    uint32_t arg;  // the oparg, or the symbol for Ref::Load/Attr/Store
    int line, col, end;
  };
  std::vector<Instr> code_;
  std::unordered_map<std::string, int> const_index_;
  int small_int_slot_[262];  // constants -5..256, the common ones
  AssembledFunction* out_ = nullptr;
  int line_of_stmt_ = 0;
  bool returned_ = false;

  // Identifiers, interned once: open addressing over `syms_`.
  struct Symbol {
    std::string_view text;
    bool keyword = false;
    bool local = false;
    int var = -1;   // co_varnames slot once used as a local
    int name = -1;  // co_names slot once used as a global or attribute
  };
  std::vector<Symbol> syms_;
  std::vector<int> sym_slots_;
  int sym(std::string_view s);

  void emit(uint8_t op, uint32_t arg, int col, int end) {
    code_.push_back(Instr{op, Ref::None, arg, line_of_stmt_, col, end});
  }
  void emit_ref(uint8_t op, Ref ref, int symbol, int col, int end) {
    code_.push_back(Instr{op, ref, static_cast<uint32_t>(symbol), line_of_stmt_, col, end});
  }
  int const_slot(const Constant& c);
  int name_slot(int symbol);
  int var_slot(int symbol);
  void visit(int e);
  void visit_call(int e);
  void visit_sequence(int e, bool tuple);
  void visit_stmt(const Stmt& s);
  void assemble();
};

// ------------------------------------------------------------------------------
// Constants
// ------------------------------------------------------------------------------

// The interning key of a constant: equal exactly when CPython's
// _PyCode_ConstantKey makes them one constant (same type and value; -0.0 and
// 0.0 differ).
void const_key(const Constant& c, std::string& k) {
  using K = Constant::Kind;
  switch (c.kind) {
    case K::None: k += 'n'; break;
    case K::Ellipsis: k += 'e'; break;
    case K::Bool: k += c.boolean ? "T" : "F"; break;
    case K::Int: k += 'i'; k += std::to_string(c.integer); k += ';'; break;
    case K::Float: {
      char bits[sizeof(double)];
      std::memcpy(bits, &c.floating, sizeof bits);
      k += 'f';
      k.append(bits, sizeof bits);
      break;
    }
    case K::Str:
      k += 's';
      k += std::to_string(c.text.size());
      k += ':';
      k += c.text;
      break;
    case K::Tuple:
      k += '(';
      for (const auto& i : c.items) const_key(i, k);
      k += ')';
      break;
  }
}

// ------------------------------------------------------------------------------
// Parser
// ------------------------------------------------------------------------------

P Assembler::parse_number() {
  size_t b = pos_;
  bool is_float = false;
  while (pos_ < line_.size()) {
    char c = line_[pos_];
    if (c >= '0' && c <= '9') {
      ++pos_;
    } else if (c == '.') {
      is_float = true;
      ++pos_;
    } else if (c == 'e' || c == 'E') {
      is_float = true;
      ++pos_;
      if (pos_ < line_.size() && (line_[pos_] == '+' || line_[pos_] == '-')) ++pos_;
    } else {
      break;
    }
  }
  if (pos_ < line_.size() && (name_char(line_[pos_]) || line_[pos_] == '.'))
    refuse(Refusal::kLiteral, "number literal form");  // 0x.., 1j, 1_000, ...
  std::string_view t = line_.substr(b, pos_ - b);
  Constant c;
  if (is_float) {
    c.kind = Constant::Kind::Float;
    auto r = std::from_chars(t.data(), t.data() + t.size(), c.floating);
    if (r.ec != std::errc() || r.ptr != t.data() + t.size()) refuse(Refusal::kLiteral, "float literal");
  } else {
    if (t.size() > 1 && t[0] == '0') refuse(Refusal::kLiteral, "int literal with leading zero");
    c.kind = Constant::Kind::Int;
    auto r = std::from_chars(t.data(), t.data() + t.size(), c.integer);
    if (r.ec != std::errc() || r.ptr != t.data() + t.size()) refuse(Refusal::kLiteral, "int literal beyond 64 bits");
  }
  int col = static_cast<int>(b);
  return P{add_const(std::move(c), col, static_cast<int>(pos_)), col, static_cast<int>(pos_)};
}

void append_utf8(std::string& s, uint32_t cp) {
  if (cp >= 0xD800 && cp <= 0xDFFF) refuse(Refusal::kLiteral, "surrogate in string literal");
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x110000) {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    refuse(Refusal::kLiteral, "code point out of range");
  }
}

P Assembler::parse_string() {
  size_t b = pos_;
  char q = line_[pos_++];
  if (line_.compare(b, 3, std::string(3, q)) == 0) refuse(Refusal::kLiteral, "triple-quoted string");
  Constant c;
  c.kind = Constant::Kind::Str;
  for (;;) {
    if (pos_ >= line_.size()) refuse(Refusal::kLiteral, "unterminated string");
    char ch = line_[pos_++];
    if (ch == q) break;
    if (ch != '\\') {
      c.text += ch;
      continue;
    }
    if (pos_ >= line_.size()) refuse(Refusal::kLiteral, "line continuation in string");
    char e = line_[pos_++];
    int digits = 0;
    switch (e) {
      case '\\': c.text += '\\'; break;
      case '\'': c.text += '\''; break;
      case '"': c.text += '"'; break;
      case 'n': c.text += '\n'; break;
      case 'r': c.text += '\r'; break;
      case 't': c.text += '\t'; break;
      case 'x': digits = 2; break;
      case 'u': digits = 4; break;
      case 'U': digits = 8; break;
      default: refuse(Refusal::kLiteral, "string escape");
    }
    if (digits) {
      uint32_t cp = 0;
      for (int i = 0; i < digits; ++i) {
        if (pos_ >= line_.size()) refuse(Refusal::kLiteral, "short escape");
        char h = line_[pos_++];
        uint32_t v;
        if (h >= '0' && h <= '9') v = static_cast<uint32_t>(h - '0');
        else if (h >= 'a' && h <= 'f') v = static_cast<uint32_t>(h - 'a' + 10);
        else if (h >= 'A' && h <= 'F') v = static_cast<uint32_t>(h - 'A' + 10);
        else refuse(Refusal::kLiteral, "bad hex escape");
        cp = cp * 16 + v;
      }
      append_utf8(c.text, cp);
    }
  }
  int col = static_cast<int>(b), end = static_cast<int>(pos_);
  skip_space();
  if (pos_ < line_.size() && (line_[pos_] == '\'' || line_[pos_] == '"')) refuse(Refusal::kLiteral, "implicit string concatenation");
  return P{add_const(std::move(c), col, end), col, end};
}

// A tuple of the children pushed since `mark`; folded to a constant when all
// are constants (CPython's fold_tuple).
P Assembler::make_tuple(size_t mark, int col, int end) {
  bool all_const = true;
  for (size_t i = mark; i < scratch_.size(); ++i) all_const = all_const && is_const(scratch_[i]);
  if (all_const) {
    Constant t;
    t.kind = Constant::Kind::Tuple;
    for (size_t i = mark; i < scratch_.size(); ++i) t.items.push_back(const_of(scratch_[i]));
    scratch_.resize(mark);
    return P{add_const(std::move(t), col, end), col, end};
  }
  int e = add_expr(EK::Tuple, col, end);
  set_kids(e, mark);
  return P{e, col, end};
}

P Assembler::parse_sequence(char close, int open_col, EK kind) {
  const char closing[2] = {close, 0};
  size_t mark = scratch_.size();
  bool comma = false;
  while (!accept(closing)) {
    P x = parse_expr();
    scratch_.push_back(x.node);
    if (accept(",")) {
      comma = true;
      continue;
    }
    expect(closing);
    break;
  }
  int end = static_cast<int>(pos_);
  size_t n = scratch_.size() - mark;
  if (kind == EK::Tuple) {
    if (n == 1 && !comma) {  // a parenthesized expression, not a tuple
      int inner = scratch_.back();
      scratch_.pop_back();
      return P{inner, open_col, end};
    }
    return make_tuple(mark, open_col, end);
  }
  int e = add_expr(EK::List, open_col, end);
  set_kids(e, mark);
  return P{e, open_col, end};
}

P Assembler::parse_dict(int open_col) {
  size_t mark = scratch_.size();
  while (!accept("}")) {
    P k = parse_expr();
    expect(":");
    P v = parse_expr();
    scratch_.push_back(k.node);
    scratch_.push_back(v.node);
    if (accept(",")) continue;
    expect("}");
    break;
  }
  int e = add_expr(EK::Dict, open_col, static_cast<int>(pos_));
  set_kids(e, mark);
  return P{e, open_col, static_cast<int>(pos_)};
}

P Assembler::parse_atom() {
  skip_space();
  if (pos_ >= line_.size()) refuse(Refusal::kSyntax, "expression expected");
  char c = line_[pos_];
  int col = static_cast<int>(pos_);
  if (name_start(c)) {
    std::string_view id = take_name();
    int end = static_cast<int>(pos_);
    Constant k;
    if (id == "None") return P{add_const(k, col, end), col, end};
    if (id == "True" || id == "False") {
      k.kind = Constant::Kind::Bool;
      k.boolean = id == "True";
      return P{add_const(std::move(k), col, end), col, end};
    }
    int y = sym(id);
    if (syms_[static_cast<size_t>(y)].keyword || id == "__debug__") refuse(Refusal::kConstruct, "keyword in expression");
    int e = add_expr(EK::Name, col, end);
    exprs_[e].id = id;
    exprs_[e].sym = y;
    return P{e, col, end};
  }
  if (c >= '0' && c <= '9') return parse_number();
  if (c == '.' && pos_ + 1 < line_.size() && line_[pos_ + 1] >= '0' && line_[pos_ + 1] <= '9') return parse_number();
  if (c == '\'' || c == '"') return parse_string();
  if (accept("...")) {
    Constant k;
    k.kind = Constant::Kind::Ellipsis;
    return P{add_const(std::move(k), col, col + 3), col, col + 3};
  }
  if (accept("(")) return parse_sequence(')', col, EK::Tuple);
  if (accept("[")) return parse_sequence(']', col, EK::List);
  if (accept("{")) return parse_dict(col);
  refuse(Refusal::kSyntax, std::string("unexpected character '") + c + "'");
}

void Assembler::parse_call(P& p) {
  size_t mark = scratch_.size();
  scratch_.push_back(p.node);
  std::vector<std::string_view> kws;  // nested calls append to kwnames_ meanwhile
  int nkw = 0;
  while (!accept(")")) {
    if (peek("*")) refuse(Refusal::kStarArgs, "starred argument");
    // keyword argument: NAME '=' (not '==')
    size_t save = pos_;
    if (peek_name()) {
      std::string_view kw = take_name();
      if (accept("=")) {
        if (syms_[static_cast<size_t>(sym(kw))].keyword) refuse(Refusal::kSyntax, "keyword as argument name");
        P v = parse_expr();
        // compile() raises SyntaxError("keyword argument repeated")
        for (std::string_view k : kws)
          if (k == kw) refuse(Refusal::kSyntax, "keyword argument repeated");
        kws.push_back(kw);
        scratch_.push_back(v.node);
        ++nkw;
        if (accept(",")) continue;
        expect(")");
        break;
      }
      pos_ = save;
    }
    if (nkw) refuse(Refusal::kSyntax, "positional argument after keyword argument");
    P a = parse_expr();
    scratch_.push_back(a.node);
    if (accept(",")) continue;
    expect(")");
    break;
  }
  int e = add_expr(EK::Call, p.start, static_cast<int>(pos_));
  set_kids(e, mark);
  exprs_[e].nkw = nkw;
  exprs_[e].kw_first = static_cast<int>(kwnames_.size());
  kwnames_.insert(kwnames_.end(), kws.begin(), kws.end());
  p = P{e, p.start, static_cast<int>(pos_)};
}

P Assembler::parse_primary() {
  P p = parse_atom();
  for (;;) {
    if (accept(".")) {
      std::string_view attr = take_name();
      int y = sym(attr);
      if (syms_[static_cast<size_t>(y)].keyword) refuse(Refusal::kSyntax, "keyword as attribute");
      int e = add_expr(EK::Attribute, p.start, static_cast<int>(pos_));
      exprs_[e].id = attr;
      exprs_[e].sym = y;
      exprs_[e].a = p.node;
      p = P{e, p.start, static_cast<int>(pos_)};
    } else if (accept("(")) {
      // compiler.c's check_caller warns (SyntaxWarning, "perhaps you missed
      // a comma?") on calling a literal or a display
      EK k = exprs_[static_cast<size_t>(p.node)].kind;
      if (k == EK::Const || k == EK::Tuple || k == EK::List || k == EK::Dict)
        refuse(Refusal::kConstruct, "call of a literal (CPython warns)");
      parse_call(p);
    } else if (accept("[")) {
      size_t mark = scratch_.size();
      bool comma = false;
      while (!accept("]")) {
        P x = parse_expr();
        if (peek(":")) refuse(Refusal::kConstruct, "slice syntax");
        scratch_.push_back(x.node);
        if (accept(",")) {
          comma = true;
          continue;
        }
        expect("]");
        break;
      }
      size_t n = scratch_.size() - mark;
      if (n == 0) refuse(Refusal::kSyntax, "empty subscript");
      int index;
      if (n == 1 && !comma) {
        index = scratch_.back();
        scratch_.pop_back();
      } else {
        if (comma && n == 1) refuse(Refusal::kConstruct, "one-element tuple index");
        // the unparenthesized tuple spans its first to its last element
        index = make_tuple(mark, exprs_[scratch_[mark]].col, exprs_[scratch_.back()].end).node;
      }
      if (is_const(p.node) && is_const(index)) refuse(Refusal::kFoldedConstant, "constant subscript (CPython folds it)");
      if (subscript_warns(p.node, index)) refuse(Refusal::kConstruct, "subscript CPython warns about");
      p = make_pair(EK::Subscript, 0, p, P{index, 0, 0}, static_cast<int>(pos_));
    } else {
      return p;
    }
  }
}

// Whether compiler.c's check_subscripter or check_index warns (SyntaxWarning,
// "perhaps you missed a comma?") on `value[index]`: subscripting None, ...,
// a number, or indexing a str, tuple or list with a literal that is not an int.
bool Assembler::subscript_warns(int value, int index) const {
  using K = Constant::Kind;
  const Expr& v = exprs_[static_cast<size_t>(value)];
  if (v.kind == EK::Const) {
    K k = const_of(value).kind;
    if (k == K::None || k == K::Ellipsis || k == K::Int || k == K::Bool || k == K::Float) return true;
  }
  // infer_type(index): known for literals and displays only
  const Expr& i = exprs_[static_cast<size_t>(index)];
  bool known_not_int = i.kind == EK::Tuple || i.kind == EK::List || i.kind == EK::Dict ||
                       (i.kind == EK::Const && const_of(index).kind != K::Int && const_of(index).kind != K::Bool);
  if (!known_not_int) return false;
  bool sequence = v.kind == EK::Tuple || v.kind == EK::List ||
                  (v.kind == EK::Const && (const_of(value).kind == K::Str || const_of(value).kind == K::Tuple));
  return sequence;
}

// A node of two children (BinOp, Compare, Subscript) spanning left.start..stop.
P Assembler::make_pair(EK kind, uint8_t op, const P& left, const P& right, int stop) {
  int e = add_expr(kind, left.start, stop);
  exprs_[e].op = op;
  scratch_.push_back(left.node);
  scratch_.push_back(right.node);
  set_kids(e, scratch_.size() - 2);
  return P{e, left.start, stop};
}

P Assembler::parse_power() {
  P base = parse_primary();
  if (!accept("**")) return base;
  P exp = parse_factor();
  if (is_const(base.node) && is_const(exp.node)) refuse(Refusal::kFoldedConstant, "constant expression (CPython folds it)");
  return make_pair(EK::BinOp, NB_POWER, base, exp, exp.stop);
}

P Assembler::parse_factor() {
  skip_space();
  int col = static_cast<int>(pos_);
  uint8_t op;
  if (accept("-")) op = UNARY_NEGATIVE;
  else if (accept("+")) op = UNARY_POSITIVE;
  else if (accept("~")) op = UNARY_INVERT;
  else return parse_power();
  P x = parse_factor();
  // CPython's fold_unaryop, restricted to the numeric cases it folds
  if (is_const(x.node)) {
    Constant c = const_of(x.node);
    using K = Constant::Kind;
    if (c.kind == K::Int && c.integer == INT64_MIN) refuse(Refusal::kFoldedConstant, "integer overflow in folding");
    if (c.kind == K::Int && op == UNARY_NEGATIVE) c.integer = -c.integer;
    else if (c.kind == K::Int && op == UNARY_INVERT) c.integer = ~c.integer;
    else if (c.kind == K::Float && op == UNARY_NEGATIVE) c.floating = -c.floating;
    else if (!((c.kind == K::Int || c.kind == K::Float) && op == UNARY_POSITIVE))
      refuse(Refusal::kFoldedConstant, "unary operator on a non-numeric constant");
    return P{add_const(std::move(c), col, x.stop), col, x.stop};
  }
  int e = add_expr(EK::Unary, col, x.stop);
  exprs_[e].op = op;
  exprs_[e].a = x.node;
  return P{e, col, x.stop};
}

// Binary operator levels, loosest first: | ^ & (<< >>) (+ -) (* / // % @)
P Assembler::parse_binary(int level) {
  if (level == 6) return parse_factor();
  P left = parse_binary(level + 1);
  for (;;) {
    uint8_t op;
    bool found = true;
    switch (level) {
      case 0: found = accept("|"); op = NB_OR; break;
      case 1: found = accept("^"); op = NB_XOR; break;
      case 2: found = accept("&"); op = NB_AND; break;
      case 3:
        if (accept("<<")) op = NB_LSHIFT;
        else if (accept(">>")) op = NB_RSHIFT;
        else found = false;
        break;
      case 4:
        if (accept("+")) op = NB_ADD;
        else if (accept("-")) op = NB_SUBTRACT;
        else found = false;
        break;
      default:
        if (accept("*")) op = NB_MULTIPLY;
        else if (accept("//")) op = NB_FLOOR_DIVIDE;
        else if (accept("/")) op = NB_TRUE_DIVIDE;
        else if (accept("%")) op = NB_REMAINDER;
        else if (accept("@")) op = NB_MATRIX_MULTIPLY;
        else found = false;
        break;
    }
    if (!found) return left;
    P right = parse_binary(level + 1);
    if (is_const(left.node) && is_const(right.node)) refuse(Refusal::kFoldedConstant, "constant expression (CPython folds it)");
    left = make_pair(EK::BinOp, op, left, right, right.stop);
  }
}

P Assembler::parse_expr() {
  P left = parse_binary(0);
  skip_space();
  int cmp = -1;
  uint8_t opcode = COMPARE_OP;
  if (pos_ < line_.size() && std::strchr("<>=!", line_[pos_])) {
    if (accept("<=")) cmp = CMP_LE;
    else if (accept(">=")) cmp = CMP_GE;
    else if (accept("==")) cmp = CMP_EQ;
    else if (accept("!=")) cmp = CMP_NE;
    else if (accept("<")) cmp = CMP_LT;
    else if (accept(">")) cmp = CMP_GT;
  } else if (peek_keyword("is")) {  // `is`, `is not`
    pos_ += 2;
    opcode = IS_OP;
    cmp = NOT_INVERTED;
    if (peek_keyword("not")) {
      pos_ += 3;
      cmp = INVERTED;
    }
  } else if (peek_keyword("in")) {
    pos_ += 2;
    opcode = CONTAINS_OP;
    cmp = NOT_INVERTED;
  } else if (peek_keyword("not")) {  // `not in`; a lone `not` is refused below
    size_t save = pos_;
    pos_ += 3;
    if (peek_keyword("in")) {
      pos_ += 2;
      opcode = CONTAINS_OP;
      cmp = INVERTED;
    } else {
      pos_ = save;
    }
  }
  if (cmp >= 0) {
    P right = parse_binary(0);
    skip_space();
    if (pos_ < line_.size() && (std::strchr("<>=!", line_[pos_]) || name_start(line_[pos_])))
      refuse(Refusal::kConstruct, "chained comparison");
    // compiler.c's check_compare warns (SyntaxWarning) on `is` with a literal
    // other than None, True, False and ...; compile() must be the one to warn.
    auto is_literal = [&](int e) {
      if (!is_const(e)) return false;
      Constant::Kind k = const_of(e).kind;
      return k != Constant::Kind::None && k != Constant::Kind::Bool && k != Constant::Kind::Ellipsis;
    };
    if (opcode == IS_OP && (is_literal(left.node) || is_literal(right.node)))
      refuse(Refusal::kConstruct, "'is' with a literal (CPython warns)");
    // the AST optimizer's fold_iter turns `x in [...]` into a tuple
    if (opcode == CONTAINS_OP && exprs_[static_cast<size_t>(right.node)].kind == EK::List)
      refuse(Refusal::kFoldedConstant, "'in' over a list display (CPython makes it a tuple)");
    P cmp_node = make_pair(EK::Compare, static_cast<uint8_t>(cmp), left, right, right.stop);
    exprs_[static_cast<size_t>(cmp_node.node)].cmp_opcode = opcode;
    return cmp_node;
  }
  if (next_is_word()) refuse(Refusal::kConstruct, "operator outside the subset");  // and, or, if, in, is, not, for, ...
  return left;
}

P Assembler::parse_expr_list() {
  P first = parse_expr();
  if (!peek(",")) return first;
  size_t mark = scratch_.size();
  scratch_.push_back(first.node);
  int stop = first.stop;
  while (accept(",")) {
    if (at_end() || peek(";")) refuse(Refusal::kConstruct, "trailing comma in a bare tuple");
    P x = parse_expr();
    scratch_.push_back(x.node);
    stop = x.stop;
  }
  return make_tuple(mark, first.start, stop);
}

// One logical line of the body: simple statements separated by ';'.
void Assembler::parse_statement() {
  for (;;) {
    skip_space();
    int col = static_cast<int>(pos_);
    Stmt s{Stmt::K::Expr, line_no_, col, col};
    if (peek_keyword("return")) {
      pos_ += 6;
      s.kind = Stmt::K::Return;
      s.end = static_cast<int>(pos_);
      if (!at_end() && !peek(";")) {
        P v = parse_expr_list();
        s.value = v.node;
        s.end = v.stop;
      }
    } else {
      // targets: NAME ('=' | ':' annotation '=') ... ; anything else is an
      // expression statement
      size_t save = pos_;
      bool assign = false;
      s.target_first = static_cast<int>(targets_.size());
      if (peek_name()) {
        int tcol;
        std::string_view t = take_name(&tcol);
        bool kw = syms_[static_cast<size_t>(sym(t))].keyword;
        if (!kw && peek(":")) {
          accept(":");
          parse_expr();  // the annotation: not evaluated in a function body
          expect("=");
          targets_.push_back(Target{t, tcol, static_cast<int>(pos_)});
          targets_.back().end = tcol + static_cast<int>(t.size());
          assign = true;
        } else if (!kw && accept("=")) {
          targets_.push_back(Target{t, tcol, tcol + static_cast<int>(t.size())});
          assign = true;
          // chained targets
          for (;;) {
            size_t save2 = pos_;
            if (!peek_name()) break;
            int c2;
            std::string_view t2 = take_name(&c2);
            if (!syms_[static_cast<size_t>(sym(t2))].keyword && accept("=")) {
              targets_.push_back(Target{t2, c2, c2 + static_cast<int>(t2.size())});
              continue;
            }
            pos_ = save2;
            break;
          }
        } else {
          if (kw && t != "None" && t != "True" && t != "False") refuse(Refusal::kConstruct, "statement outside the subset");
          pos_ = save;
        }
      }
      if (assign) {
        s.kind = Stmt::K::Assign;
        s.targets = static_cast<int>(targets_.size()) - s.target_first;
        P v = parse_expr_list();
        s.value = v.node;
        s.end = v.stop;
        for (int i = 0; i < s.targets; ++i)
          syms_[static_cast<size_t>(sym(targets_[static_cast<size_t>(s.target_first + i)].name))].local = true;
      } else {
        P v = parse_expr_list();
        if (is_const(v.node)) refuse(Refusal::kFoldedConstant, "constant expression statement");
        s.value = v.node;
        s.end = v.stop;
      }
    }
    if (returned_) refuse(Refusal::kCodeAfterReturn, "code after return");
    visit_stmt(s);
    returned_ = s.kind == Stmt::K::Return;
    if (at_end()) return;
    expect(";");
    if (at_end()) return;
  }
}

void Assembler::parse_header(AssembledFunction& out) {
  expect("def");
  out.name = std::string(take_name());
  if (is_keyword(out.name)) refuse(Refusal::kSyntax, "keyword as function name");
  expect("(");
  while (!accept(")")) {
    if (peek("*") || peek("/")) refuse(Refusal::kStarArgs, "star or slash parameter");
    Parameter p;
    p.name = std::string(take_name());
    if (is_keyword(p.name)) refuse(Refusal::kBadParameters, "keyword parameter name");
    if (accept(":")) {
      P a = parse_expr();
      p.annotation = std::string(line_.substr(static_cast<size_t>(a.start), static_cast<size_t>(a.stop - a.start)));
    }
    if (accept("=")) {
      P d = parse_expr();
      p.default_value = std::string(line_.substr(static_cast<size_t>(d.start), static_cast<size_t>(d.stop - d.start)));
    } else if (!out.params.empty() && !out.params.back().default_value.empty()) {
      refuse(Refusal::kBadParameters, "parameter without default after one with a default");
    }
    out.params.push_back(std::move(p));
    if (accept(",")) continue;
    expect(")");
    break;
  }
  if (accept("->")) {
    P r = parse_expr();
    out.return_annotation = std::string(line_.substr(static_cast<size_t>(r.start), static_cast<size_t>(r.stop - r.start)));
  }
  expect(":");
  if (!at_end()) refuse(Refusal::kBodyShape, "body on the def line");
}

// ------------------------------------------------------------------------------
// Code generation
// ------------------------------------------------------------------------------

// Stack effect of each instruction as CPython 3.11's stack_effect() gives it.
int stack_effect(uint8_t op, uint32_t arg) {
  switch (op) {
    case LOAD_FAST:
    case LOAD_CONST:
    case PUSH_NULL:
    case COPY:
    case LOAD_METHOD:
      return 1;
    case LOAD_GLOBAL:
      return 1 + static_cast<int>(arg & 1);
    case STORE_FAST:
    case POP_TOP:
    case RETURN_VALUE:
    case BINARY_OP:
    case BINARY_SUBSCR:
    case COMPARE_OP:
    case IS_OP:
    case CONTAINS_OP:
    case LIST_EXTEND:
    case LIST_APPEND:
    case CALL:
      return -1;
    case BUILD_TUPLE:
    case BUILD_LIST:
      return 1 - static_cast<int>(arg);
    case BUILD_MAP:
      return 1 - 2 * static_cast<int>(arg);
    case BUILD_CONST_KEY_MAP:
    case PRECALL:
      return -static_cast<int>(arg);
    default:  // RESUME, LOAD_ATTR, UNARY_*, KW_NAMES, LIST_TO_TUPLE
      return 0;
  }
}

int Assembler::const_slot(const Constant& c) {
  using K = Constant::Kind;
  int* small = nullptr;
  if (c.kind == K::Int && c.integer >= -5 && c.integer <= 256) {
    small = &small_int_slot_[c.integer + 5];
    if (*small >= 0) return *small;
  }
  std::string k;
  const_key(c, k);
  auto it = const_index_.find(k);
  if (it != const_index_.end()) return it->second;
  int i = static_cast<int>(out_->consts.size());
  out_->consts.push_back(c);
  const_index_.emplace(std::move(k), i);
  if (small) *small = i;
  return i;
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

int Assembler::sym(std::string_view s) {
  uint64_t h = fnv1a(s);
  if (syms_.size() * 2 >= sym_slots_.size()) {  // grow, keeping load <= 1/2
    std::vector<int> slots(sym_slots_.empty() ? 256 : sym_slots_.size() * 2, -1);
    size_t mask = slots.size() - 1;
    for (size_t i = 0; i < syms_.size(); ++i) {
      size_t k = fnv1a(syms_[i].text) & mask;
      while (slots[k] >= 0) k = (k + 1) & mask;
      slots[k] = static_cast<int>(i);
    }
    sym_slots_.swap(slots);
  }
  size_t mask = sym_slots_.size() - 1;
  for (size_t k = h & mask;; k = (k + 1) & mask) {
    int i = sym_slots_[k];
    if (i < 0) {
      sym_slots_[k] = static_cast<int>(syms_.size());
      syms_.push_back(Symbol{s});
      syms_.back().keyword = is_keyword(s);
      return static_cast<int>(syms_.size()) - 1;
    }
    if (syms_[static_cast<size_t>(i)].text == s) return i;
  }
}

// The symbol's slot in `table` (co_names or co_varnames), added on first use.
int table_slot(int& slot, std::vector<std::string>& table, std::string_view text) {
  if (slot < 0) {
    slot = static_cast<int>(table.size());
    table.emplace_back(text);
  }
  return slot;
}

int Assembler::name_slot(int symbol) {
  Symbol& y = syms_[static_cast<size_t>(symbol)];
  return table_slot(y.name, out_->names, y.text);
}

int Assembler::var_slot(int symbol) {
  Symbol& y = syms_[static_cast<size_t>(symbol)];
  return table_slot(y.var, out_->varnames, y.text);
}

// starunpack_helper for tuples and lists without starred items
void Assembler::visit_sequence(int e, bool tuple) {
  const Expr x = exprs_[static_cast<size_t>(e)];
  int n = x.kids;
  if (!tuple && n > 2) {
    bool all_const = true;
    for (int i = 0; i < n; ++i) all_const = all_const && is_const(kids_[static_cast<size_t>(x.first + i)]);
    if (all_const) {
      Constant t;
      t.kind = Constant::Kind::Tuple;
      for (int i = 0; i < n; ++i) t.items.push_back(const_of(kids_[static_cast<size_t>(x.first + i)]));
      emit(BUILD_LIST, 0, x.col, x.end);
      emit(LOAD_CONST, static_cast<uint32_t>(const_slot(t)), x.col, x.end);
      emit(LIST_EXTEND, 1, x.col, x.end);
      return;
    }
  }
  if (n > kStackUseGuideline) {
    emit(BUILD_LIST, 0, x.col, x.end);
    for (int i = 0; i < n; ++i) {
      visit(kids_[static_cast<size_t>(x.first + i)]);
      emit(LIST_APPEND, 1, x.col, x.end);
    }
    if (tuple) emit(LIST_TO_TUPLE, 0, x.col, x.end);
    return;
  }
  for (int i = 0; i < n; ++i) visit(kids_[static_cast<size_t>(x.first + i)]);
  emit(tuple ? BUILD_TUPLE : BUILD_LIST, static_cast<uint32_t>(n), x.col, x.end);
}

void Assembler::visit_call(int e) {
  const Expr x = exprs_[static_cast<size_t>(e)];
  int func = kids_[static_cast<size_t>(x.first)];
  int nargs = x.kids - 1 - x.nkw;
  const Expr f = exprs_[static_cast<size_t>(func)];
  auto kw_names = [&](int col, int end) {
    if (!x.nkw) return;
    Constant t;
    t.kind = Constant::Kind::Tuple;
    for (int i = 0; i < x.nkw; ++i) {
      Constant s;
      s.kind = Constant::Kind::Str;
      s.text = std::string(kwnames_[static_cast<size_t>(x.kw_first + i)]);
      t.items.push_back(std::move(s));
    }
    emit(KW_NAMES, static_cast<uint32_t>(const_slot(t)), col, end);
  };
  uint32_t total = static_cast<uint32_t>(nargs + x.nkw);
  // maybe_optimize_method_call
  if (f.kind == EK::Attribute && nargs + x.nkw + (x.nkw != 0) < kStackUseGuideline) {
    visit(f.a);
    emit_ref(LOAD_METHOD, Ref::Attr, f.sym, f.col, f.end);
    for (int i = 1; i < x.kids; ++i) visit(kids_[static_cast<size_t>(x.first + i)]);
    kw_names(f.col, f.end);
    emit(PRECALL, total, x.col, x.end);
    emit(CALL, total, x.col, x.end);
    return;
  }
  // compiler_call + compiler_call_helper
  if (nargs + 2 * x.nkw > kStackUseGuideline) refuse(Refusal::kTooManyCallArgs, "call with many arguments (CALL_FUNCTION_EX)");
  emit(PUSH_NULL, 0, f.col, f.end);
  visit(func);
  for (int i = 1; i < x.kids; ++i) visit(kids_[static_cast<size_t>(x.first + i)]);
  kw_names(x.col, x.end);
  emit(PRECALL, total, x.col, x.end);
  emit(CALL, total, x.col, x.end);
}

void Assembler::visit(int e) {
  const Expr x = exprs_[static_cast<size_t>(e)];
  switch (x.kind) {
    case EK::Name:
      emit_ref(LOAD_FAST, Ref::Load, x.sym, x.col, x.end);  // or LOAD_GLOBAL: see assemble()
      return;
    case EK::Const:
      emit(LOAD_CONST, static_cast<uint32_t>(const_slot(const_of(e))), x.col, x.end);
      return;
    case EK::Attribute:
      visit(x.a);
      emit_ref(LOAD_ATTR, Ref::Attr, x.sym, x.col, x.end);
      return;
    case EK::Call:
      visit_call(e);
      return;
    case EK::BinOp:
      visit(kids_[static_cast<size_t>(x.first)]);
      visit(kids_[static_cast<size_t>(x.first + 1)]);
      emit(BINARY_OP, x.op, x.col, x.end);
      return;
    case EK::Compare:
      visit(kids_[static_cast<size_t>(x.first)]);
      visit(kids_[static_cast<size_t>(x.first + 1)]);
      emit(x.cmp_opcode, x.op, x.col, x.end);
      return;
    case EK::Unary:
      visit(x.a);
      emit(x.op, 0, x.col, x.end);
      return;
    case EK::Subscript:
      visit(kids_[static_cast<size_t>(x.first)]);
      visit(kids_[static_cast<size_t>(x.first + 1)]);
      emit(BINARY_SUBSCR, 0, x.col, x.end);
      return;
    case EK::Tuple:
      visit_sequence(e, true);
      return;
    case EK::List:
      visit_sequence(e, false);
      return;
    case EK::Dict: {
      // compiler_dict / compiler_subdict for up to 15 plain items
      int n = x.kids / 2;
      if (n == 0) {
        emit(BUILD_MAP, 0, x.col, x.end);
        return;
      }
      if (n * 2 > kStackUseGuideline) refuse(Refusal::kDictTooLarge, "big dict display");
      bool keys_const = true;
      for (int i = 0; i < n; ++i) keys_const = keys_const && is_const(kids_[static_cast<size_t>(x.first + 2 * i)]);
      if (n > 1 && keys_const) {
        Constant t;
        t.kind = Constant::Kind::Tuple;
        for (int i = 0; i < n; ++i) {
          visit(kids_[static_cast<size_t>(x.first + 2 * i + 1)]);
          t.items.push_back(const_of(kids_[static_cast<size_t>(x.first + 2 * i)]));
        }
        emit(LOAD_CONST, static_cast<uint32_t>(const_slot(t)), x.col, x.end);
        emit(BUILD_CONST_KEY_MAP, static_cast<uint32_t>(n), x.col, x.end);
        return;
      }
      for (int i = 0; i < 2 * n; ++i) visit(kids_[static_cast<size_t>(x.first + i)]);
      emit(BUILD_MAP, static_cast<uint32_t>(n), x.col, x.end);
      return;
    }
  }
}

void Assembler::visit_stmt(const Stmt& s) {
  line_of_stmt_ = s.line;
  switch (s.kind) {
    case Stmt::K::Assign:
      visit(s.value);
      for (int i = 0; i < s.targets; ++i) {
        const Target& t = targets_[static_cast<size_t>(s.target_first + i)];
        if (i < s.targets - 1) emit(COPY, 1, s.col, s.end);
        emit_ref(STORE_FAST, Ref::Store, sym(t.name), t.col, t.end);
      }
      return;
    case Stmt::K::Expr: {
      visit(s.value);
      // compiler_visit_stmt_expr marks its POP_TOP artificial (no location);
      // propagate_line_numbers then gives it the previous instruction's, which
      // differs from the statement's span for `(x)` or `(a).b`.
      int col = code_.back().col, end = code_.back().end;
      emit(POP_TOP, 0, col, end);
      return;
    }
    case Stmt::K::Return:
      if (s.value < 0) {
        Constant none;
        emit(LOAD_CONST, static_cast<uint32_t>(const_slot(none)), s.col, s.end);
        emit(RETURN_VALUE, 0, s.col, s.end);
      } else if (is_const(s.value)) {  // compiler_return: the constant's location
        const Expr& v = exprs_[static_cast<size_t>(s.value)];
        emit(LOAD_CONST, static_cast<uint32_t>(const_slot(const_of(s.value))), v.col, v.end);
        emit(RETURN_VALUE, 0, v.col, v.end);
      } else {
        visit(s.value);
        emit(RETURN_VALUE, 0, s.col, s.end);
      }
      return;
  }
}

void write_varint(std::string& out, uint32_t v) {
  while (v >= 64) {
    out += static_cast<char>(0x40 | (v & 63));
    v >>= 6;
  }
  out += static_cast<char>(v);
}

void write_svarint(std::string& out, int v) {
  write_varint(out, v < 0 ? ((static_cast<uint32_t>(-v) << 1) | 1) : (static_cast<uint32_t>(v) << 1));
}

// Instructions to bytes, and the 3.11 location table (Objects/locations.md):
// one entry per instruction (EXTENDED_ARGs and caches included), split every
// 8 code units, in the shortest form write_location_info_entry picks.
void Assembler::assemble() {
  // Resolve identifiers in emission order (which is the order CPython adds
  // them to co_varnames and co_names), fold PUSH_NULL into a following
  // LOAD_GLOBAL as optimize_basic_block does, and take the stack depth.
  size_t w = 0;
  int depth = 0;
  for (size_t r = 0; r < code_.size(); ++r) {
    Instr in = code_[r];
    if (in.ref != Ref::None) {
      int y = static_cast<int>(in.arg);
      if (in.ref == Ref::Load && !syms_[static_cast<size_t>(y)].local) {
        in.op = LOAD_GLOBAL;
        in.arg = static_cast<uint32_t>(name_slot(y)) << 1;
        if (w > 0 && code_[w - 1].op == PUSH_NULL) {
          --w;
          depth -= stack_effect(PUSH_NULL, 0);
          in.arg |= 1;
        }
      } else if (in.ref == Ref::Attr) {
        in.arg = static_cast<uint32_t>(name_slot(y));
      } else {
        in.arg = static_cast<uint32_t>(var_slot(y));
      }
      in.ref = Ref::None;
    }
    depth += stack_effect(in.op, in.arg);
    if (depth > out_->stacksize) out_->stacksize = depth;
    code_[w++] = in;
  }
  code_.resize(w);

  std::string& code = out_->code;
  std::string& table = out_->linetable;
  int prev_line = out_->first_line;
  for (const Instr& in : code_) {
    int units = 1 + cache_entries(in.op);
    for (uint32_t shift = 24; shift > 0; shift -= 8) {
      if (in.arg >> shift) {
        code += static_cast<char>(EXTENDED_ARG);
        code += static_cast<char>((in.arg >> shift) & 0xFF);
        ++units;
      }
    }
    code += static_cast<char>(in.op);
    code += static_cast<char>(in.arg & 0xFF);
    code.append(static_cast<size_t>(2 * cache_entries(in.op)), '\0');
    while (units > 0) {
      int n = units < kMaxUnitsPerEntry ? units : kMaxUnitsPerEntry;
      units -= n;
      int delta = in.line - prev_line;
      int col = in.col, end = in.end;
      if (delta == 0 && col / 8 <= LOC_SHORT_LAST - LOC_SHORT_0 && end - col < 16 && end >= col) {
        table += location_header(static_cast<LocationCode>(LOC_SHORT_0 + col / 8), n);
        table += static_cast<char>(((col % 8) << 4) | (end - col));
      } else if (delta >= 0 && delta <= LOC_ONE_LINE_2 - LOC_ONE_LINE_0 && col < 128 && end < 128) {
        table += location_header(static_cast<LocationCode>(LOC_ONE_LINE_0 + delta), n);
        table += static_cast<char>(col);
        table += static_cast<char>(end);
      } else {
        table += location_header(LOC_LONG, n);
        write_svarint(table, delta);
        write_varint(table, 0);  // end line - line
        write_varint(table, static_cast<uint32_t>(col + 1));
        write_varint(table, static_cast<uint32_t>(end + 1));
      }
      prev_line = in.line;
    }
  }
}

void Assembler::run(AssembledFunction& out) {
  out_ = &out;
  out = AssembledFunction{};
  // split into physical lines
  std::vector<std::string_view> lines;
  for (size_t b = 0; b <= src_.size();) {
    size_t e = src_.find('\n', b);
    if (e == std::string_view::npos) e = src_.size();
    lines.push_back(src_.substr(b, e - b));
    b = e + 1;
  }
  auto blank = [&](std::string_view l) {
    for (char c : l) {
      if (c == '#') return true;
      if (c != ' ') return false;
    }
    return true;
  };
  // the prologue: unindented module-level lines up to the first `def`
  size_t i = 0;
  bool code_before = false;
  for (; i < lines.size(); ++i) {
    std::string_view l = lines[i];
    if (l.compare(0, 4, "def ") == 0) break;
    if (blank(l)) continue;
    if (l.find("import") != std::string_view::npos) refuse(Refusal::kImportsBeforeDef, "import before the def");
    if (l[0] == ' ' || l[0] == '@' || l.back() == '\\' || l.find("\"\"\"") != std::string_view::npos ||
        l.find("'''") != std::string_view::npos)
      refuse(Refusal::kPrologue, "prologue outside the subset");
    code_before = true;
  }
  if (i == lines.size()) refuse(Refusal::kNoFunction, "no def");
  if (code_before) out.prologue = std::string(src_.substr(0, static_cast<size_t>(lines[i].data() - src_.data())));
  for (std::string_view l : lines)
    for (char c : l)
      if (c == '\t' || c == '\r' || c == '\f') refuse(Refusal::kWhitespace, "tab or carriage return in source");
  line_ = lines[i];
  line_no_ = static_cast<int>(i) + 1;
  pos_ = 0;
  if (line_.empty() || line_[0] == ' ') refuse(Refusal::kBodyShape, "indented def");
  out.first_line = line_no_;
  parse_header(out);
  // the parameters may not repeat
  for (size_t a = 0; a < out.params.size(); ++a)
    for (size_t b = a + 1; b < out.params.size(); ++b)
      if (out.params[a].name == out.params[b].name) refuse(Refusal::kBadParameters, "duplicate parameter");
  // co_consts[0] is the docstring slot: None; parameters come first in co_varnames
  std::fill(std::begin(small_int_slot_), std::end(small_int_slot_), -1);
  const_slot(Constant{});
  for (const auto& p : out.params) {
    int y = sym(p.name);
    syms_[static_cast<size_t>(y)].local = true;
    var_slot(y);
  }
  line_of_stmt_ = out.first_line;
  emit(RESUME, 0, 0, 0);
  // the body: equally indented lines up to the end
  size_t indent = 0;
  for (++i; i < lines.size(); ++i) {
    if (blank(lines[i])) continue;
    size_t ind = lines[i].find_first_not_of(' ');
    if (indent == 0) indent = ind;
    if (ind != indent || indent == 0) refuse(Refusal::kBodyShape, "not a single flat function body");
    line_ = lines[i];
    line_no_ = static_cast<int>(i) + 1;
    pos_ = ind;
    if (returned_) refuse(Refusal::kCodeAfterReturn, "code after return");
    // the trees of one line are dropped once it is emitted
    exprs_.clear();
    kids_.clear();
    kwnames_.clear();
    pool_.clear();
    targets_.clear();
    parse_statement();
  }
  if (!returned_) refuse(Refusal::kNoReturn, "function does not end in return");
  assemble();
}

}  // namespace

const char* refusal_name(Refusal r) {
  switch (r) {
    case Refusal::kNone: return "none";
    case Refusal::kUnsupportedInterpreter: return "unsupported_interpreter";
    case Refusal::kNoFunction: return "no_function";
    case Refusal::kImportsBeforeDef: return "imports_before_def";
    case Refusal::kPrologue: return "prologue";
    case Refusal::kBodyShape: return "body_shape";
    case Refusal::kNoReturn: return "no_return";
    case Refusal::kCodeAfterReturn: return "code_after_return";
    case Refusal::kWhitespace: return "whitespace";
    case Refusal::kStarArgs: return "star_args";
    case Refusal::kBadParameters: return "bad_parameters";
    case Refusal::kLiteral: return "literal";
    case Refusal::kConstruct: return "construct";
    case Refusal::kSyntax: return "syntax";
    case Refusal::kFoldedConstant: return "folded_constant";
    case Refusal::kTooManyCallArgs: return "too_many_call_args";
    case Refusal::kDictTooLarge: return "dict_too_large";
  }
  return "unknown";
}

Refusal assemble_function(std::string_view src, AssembledFunction& out, std::string* detail) {
  try {
    Assembler(src).run(out);
    return Refusal::kNone;
  } catch (const Refused& r) {
    if (detail) *detail = r.detail;
    return r.reason;
  }
}

}  // namespace fxcpp::cpython311
