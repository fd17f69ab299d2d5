#include "graph/xml.h"

#include <cstdlib>
#include <cstring>

#include "core/log.h"

namespace weft::graph {

const std::string* XmlNode::attr(const std::string& key) const {
  for (const auto& kv : attrs) {
    if (kv.first == key) return &kv.second;
  }
  return nullptr;
}

std::string XmlNode::attrOr(const std::string& key, const std::string& fallback) const {
  const std::string* v = attr(key);
  return v ? *v : fallback;
}

long long XmlNode::intAttr(const std::string& key, long long fallback) const {
  const std::string* v = attr(key);
  if (!v || v->empty()) return fallback;
  char* end = nullptr;
  long long x = strtoll(v->c_str(), &end, 0);
  return end == v->c_str() ? fallback : x;
}

double XmlNode::floatAttr(const std::string& key, double fallback) const {
  const std::string* v = attr(key);
  if (!v || v->empty()) return fallback;
  char* end = nullptr;
  double x = strtod(v->c_str(), &end);
  return end == v->c_str() ? fallback : x;
}

void XmlNode::setAttr(const std::string& key, const std::string& value) {
  for (auto& kv : attrs) {
    if (kv.first == key) {
      kv.second = value;
      return;
    }
  }
  attrs.emplace_back(key, value);
}

void XmlNode::initAttr(const std::string& key, const std::string& value) {
  if (!hasAttr(key)) attrs.emplace_back(key, value);
}

void XmlNode::removeAttr(const std::string& key) {
  for (size_t i = 0; i < attrs.size(); i++) {
    if (attrs[i].first == key) {
      attrs.erase(attrs.begin() + i);
      return;
    }
  }
}

XmlNode& XmlNode::addChild(const std::string& childName) {
  children.emplace_back(childName);
  return children.back();
}

const XmlNode* XmlNode::child(const std::string& childName) const {
  for (const auto& c : children) {
    if (c.name == childName) return &c;
  }
  return nullptr;
}

XmlNode* XmlNode::child(const std::string& childName) {
  for (auto& c : children) {
    if (c.name == childName) return &c;
  }
  return nullptr;
}

namespace {

constexpr int kMaxDepth = 64;

// A recursive-descent reader over the whole text; `line` follows the position for messages.
class Reader {
 public:
  explicit Reader(const std::string& text) : s_(text) {}

  Status document(XmlNode* root) {
    WEFT_TRY(skipMisc());
    if (pos_ >= s_.size() || s_[pos_] != '<') return fail("expected the root element");
    WEFT_TRY(element(root, 0));
    WEFT_TRY(skipMisc());
    if (pos_ != s_.size()) return fail("unexpected content after the root element");
    return ncclSuccess;
  }

 private:
  const std::string& s_;
  size_t pos_ = 0;

  int line() const {
    int n = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); i++) n += s_[i] == '\n';
    return n;
  }

  Status fail(const char* what) const {
    WEFT_WARN("topology XML, line %d: %s; check the file given in NCCL_TOPO_FILE", line(), what);
    return ncclInvalidArgument;
  }

  static bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
  static bool isNameChar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.' || c == ':';
  }

  bool startsWith(const char* p) const { return s_.compare(pos_, strlen(p), p) == 0; }

  void skipSpace() {
    while (pos_ < s_.size() && isSpace(s_[pos_])) pos_++;
  }

  // Whitespace, comments, <?...?> and <!DOCTYPE ...> between elements.
  Status skipMisc() {
    for (;;) {
      skipSpace();
      if (startsWith("<!--")) {
        size_t end = s_.find("-->", pos_ + 4);
        if (end == std::string::npos) return fail("unterminated comment");
        pos_ = end + 3;
      } else if (startsWith("<?") || startsWith("<!")) {
        size_t end = s_.find('>', pos_);
        if (end == std::string::npos) return fail("unterminated declaration");
        pos_ = end + 1;
      } else {
        return ncclSuccess;
      }
    }
  }

  Status name(std::string* out) {
    size_t b = pos_;
    while (pos_ < s_.size() && isNameChar(s_[pos_])) pos_++;
    if (pos_ == b) return fail("expected a name");
    *out = s_.substr(b, pos_ - b);
    return ncclSuccess;
  }

  Status value(std::string* out) {
    if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\'')) return fail("expected a quoted value");
    char q = s_[pos_++];
    out->clear();
    while (pos_ < s_.size() && s_[pos_] != q) {
      char c = s_[pos_];
      if (c == '<') return fail("'<' inside an attribute value");
      if (c == '&') {
        static const struct { const char* ent; char ch; } kEnts[] = {
            {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
        bool found = false;
        for (const auto& e : kEnts) {
          if (startsWith(e.ent)) {
            out->push_back(e.ch);
            pos_ += strlen(e.ent);
            found = true;
            break;
          }
        }
        if (!found) return fail("unknown entity in an attribute value");
        continue;
      }
      out->push_back(c);
      pos_++;
    }
    if (pos_ >= s_.size()) return fail("unterminated attribute value");
    pos_++;
    return ncclSuccess;
  }

  Status element(XmlNode* node, int depth) {
    if (depth > kMaxDepth) return fail("elements nested too deeply");
    pos_++;  // '<'
    WEFT_TRY(name(&node->name));
    for (;;) {
      skipSpace();
      if (pos_ >= s_.size()) return fail("unterminated element");
      if (startsWith("/>")) {
        pos_ += 2;
        return ncclSuccess;
      }
      if (s_[pos_] == '>') {
        pos_++;
        break;
      }
      std::string key, val;
      WEFT_TRY(name(&key));
      skipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '=') return fail("expected '=' after an attribute name");
      pos_++;
      skipSpace();
      WEFT_TRY(value(&val));
      if (node->hasAttr(key)) return fail("attribute given twice");
      node->attrs.emplace_back(std::move(key), std::move(val));
    }
    // Content: child elements; text is ignored.
    for (;;) {
      WEFT_TRY(skipMisc());
      if (pos_ >= s_.size()) return fail("missing closing tag");
      if (startsWith("</")) {
        pos_ += 2;
        std::string closing;
        WEFT_TRY(name(&closing));
        if (closing != node->name) return fail("closing tag does not match the open element");
        skipSpace();
        if (pos_ >= s_.size() || s_[pos_] != '>') return fail("expected '>'");
        pos_++;
        return ncclSuccess;
      }
      if (s_[pos_] == '<') {
        node->children.emplace_back();
        WEFT_TRY(element(&node->children.back(), depth + 1));
      } else {
        while (pos_ < s_.size() && s_[pos_] != '<') pos_++;
      }
    }
  }
};

void escapeInto(const std::string& v, std::string* out) {
  for (char c : v) {
    switch (c) {
      case '&': *out += "&amp;"; break;
      case '<': *out += "&lt;"; break;
      case '>': *out += "&gt;"; break;
      case '"': *out += "&quot;"; break;
      default: out->push_back(c);
    }
  }
}

void writeNode(const XmlNode& n, int depth, std::string* out) {
  out->append(2 * depth, ' ');
  *out += '<';
  *out += n.name;
  for (const auto& kv : n.attrs) {
    *out += ' ';
    *out += kv.first;
    *out += "=\"";
    escapeInto(kv.second, out);
    *out += '"';
  }
  if (n.children.empty()) {
    *out += "/>\n";
    return;
  }
  *out += ">\n";
  for (const auto& c : n.children) writeNode(c, depth + 1, out);
  out->append(2 * depth, ' ');
  *out += "</";
  *out += n.name;
  *out += ">\n";
}

}  // namespace

Status parseXml(const std::string& text, XmlNode* root) {
  XmlNode tmp;
  Reader r(text);
  WEFT_TRY(r.document(&tmp));
  *root = std::move(tmp);
  return ncclSuccess;
}

std::string writeXml(const XmlNode& root) {
  std::string out;
  writeNode(root, 0, &out);
  return out;
}

}  // namespace weft::graph
