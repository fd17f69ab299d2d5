// A small XML tree: elements with ordered attributes and children, no text content. It is all
// NCCL's topology files use, and keeping attribute order and unknown attributes is what makes a
// load/dump round trip lossless.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace weft::graph {

struct XmlNode {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;
  std::vector<XmlNode> children;

  XmlNode() = default;
  explicit XmlNode(std::string n) : name(std::move(n)) {}

  const std::string* attr(const std::string& key) const;
  std::string attrOr(const std::string& key, const std::string& fallback) const;
  bool hasAttr(const std::string& key) const { return attr(key) != nullptr; }
  // Integer attribute (decimal, or hex with 0x); `fallback` when absent or unreadable.
  long long intAttr(const std::string& key, long long fallback) const;
  double floatAttr(const std::string& key, double fallback) const;
  // Replaces the value of an existing attribute, else appends it (order is kept).
  void setAttr(const std::string& key, const std::string& value);
  // Adds the attribute only when absent.
  void initAttr(const std::string& key, const std::string& value);
  void removeAttr(const std::string& key);

  XmlNode& addChild(const std::string& childName);
  // First child with that name, or nullptr.
  const XmlNode* child(const std::string& childName) const;
  XmlNode* child(const std::string& childName);

  bool operator==(const XmlNode& o) const {
    return name == o.name && attrs == o.attrs && children == o.children;
  }
  bool operator!=(const XmlNode& o) const { return !(*this == o); }
};

// Parses a document with one root element. The XML declaration, comments and whitespace are
// skipped; text content is ignored. Malformed input gets a warning naming the line.
[[nodiscard]] Status parseXml(const std::string& text, XmlNode* root);

// Writes the tree in NCCL's layout: two spaces per level, empty elements as <tag .../>.
std::string writeXml(const XmlNode& root);

}  // namespace weft::graph
