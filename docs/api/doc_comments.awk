# SPDX-License-Identifier: Apache-2.0
# Doxygen input filter for the public headers (docs/api/Doxyfile.in): the house style
# documents in plain // comments, which Doxygen ignores. This shows
#   - a file's opening comment lines (after the SPDX line) as its @file description,
#   - a comment on lines of its own as the documentation of what follows (///),
#   - a comment after a member or an enumerator (`x;  // ...`, `kA,  // ...`) as ///<.
# Line numbers stay the same, so Doxygen's messages point at the real lines.
BEGIN { opening = 1; trailing = 0 }
{
  line = $0
  if (opening) {
    # The SPDX line becomes the @file command; the lines after it its description.
    if (NR == 1 && line ~ /^\/\/ SPDX-License-Identifier/) { print "/// @file"; next }
    if (line ~ /^\/\//) {
      sub(/^\/\/ ?/, "", line)
      printf "/// %s\n", line
      next
    }
    opening = 0
  }
  if (line ~ /^[ \t]*\/\/[^\/]/ || line ~ /^[ \t]*\/\/$/) {
    # A comment line under a member's trailing comment continues it.
    sub(/\/\//, trailing ? "///<" : "///", line)
  } else if (line ~ /[;,][ \t]+\/\/ / && line !~ /"/) {
    sub(/[ \t]+\/\/ /, "  ///< ", line)
    trailing = 1
    print line
    next
  }
  trailing = 0
  print line
}
