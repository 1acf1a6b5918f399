// "Did you mean …?" for a mistyped name: a TOML key, a command, an option. One rule for every place
// that refuses a name from a fixed list, so a typo is answered the same way wherever it is made.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tribunal {

/// The optimal string alignment distance between `a` and `b` (Levenshtein with transpositions of
/// adjacent characters: insert, delete, substitute or swap two neighbours, each costs 1; Damerau 1964).
size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate closest to `word` by edit_distance when it is close enough to be a typo of it: at
/// most 1 edit for names of up to 4 characters, 2 up to 8, else 3 (the first such candidate on a tie);
/// empty when none is.
std::string closest_name(std::string_view word, const std::vector<std::string_view>& candidates);

/// " (did you mean 'NAME'?)" for closest_name's answer, or "" when there is none: appended to an error
/// that refuses `word`.
std::string did_you_mean(std::string_view word, const std::vector<std::string_view>& candidates);

}  // namespace tribunal
