// The referee's budget of opened bytes in flight (nodes/opening_budget.h): what fits is granted at once,
// the rest waits first come first served, and a release grants the waiters at the head that now fit.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "nodes/opening_budget.h"

using tribunal::nodes::OpeningBudget;

TEST_CASE("opening budget: grants what fits, queues the rest in order, grants on release") {
  OpeningBudget budget(100);
  std::vector<std::string> granted;
  const auto grant = [&](const char* who) { return [&granted, who] { granted.push_back(who); }; };
  int a, b, c, d, e;
  CHECK(budget.reserve(&a, 60, grant("a")));
  CHECK(budget.reserve(&b, 40, grant("b")));  // exactly full
  CHECK(budget.reserved() == 100);
  CHECK_FALSE(budget.reserve(&c, 70, grant("c")));
  CHECK_FALSE(budget.reserve(&d, 10, grant("d")));  // the budget is full
  CHECK_FALSE(budget.reserve(&d, 10, grant("d")));  // asking again changes nothing
  CHECK(budget.waiting() == 2);
  CHECK(budget.deferred() == 2);
  CHECK(budget.reserve(&a, 60, grant("a")));  // a holder keeps what it holds

  budget.release(&b);  // 60 held: c (70) does not fit, and d (10), which would, waits behind it
  CHECK(granted.empty());
  budget.release(&a);  // nothing held: c, then d beside it (80)
  CHECK(granted == std::vector<std::string>{"c", "d"});
  CHECK(budget.reserved() == 80);
  CHECK(budget.waiting() == 0);

  // One opening larger than the whole budget proceeds alone.
  CHECK_FALSE(budget.reserve(&e, 500, grant("e")));
  budget.release(&c);
  CHECK(granted.size() == 2);
  budget.release(&d);
  CHECK(granted.back() == "e");
  CHECK(budget.reserved() == 500);

  // A waiter that gives up leaves the queue; a release of an unknown holder is nothing.
  CHECK_FALSE(budget.reserve(&a, 1, grant("a")));
  budget.release(&a);
  CHECK(budget.waiting() == 0);
  budget.release(&b);
  budget.release(&e);
  CHECK(budget.reserved() == 0);
  CHECK(granted.size() == 3);
}
