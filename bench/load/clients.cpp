#include "bench/load/clients.h"

#include <atomic>

#include "net/client.h"
#include "referee/referee_dispute.h"

namespace tribunal::load_bench {

void open_disputes(NetContext& ctx, const std::string& referee_url, const PublicKey referee_key,
                   const std::vector<Dispute>& disputes, const std::shared_ptr<Outcome>& out) {
  std::vector<Client> clients;
  for (int a = 0; a < kClientAddresses; ++a) {
    ClientOptions o;
    o.local_address = "127.0.0." + std::to_string(2 + a);
    o.connect_timeout = std::chrono::seconds(60);
    clients.emplace_back(ctx, o);
  }
  auto finish = [out](bool verdict, bool correct, std::string error) {
    std::lock_guard lock(out->mu);
    ++out->done;
    out->verdicts += verdict;
    out->correct += correct;
    if (!error.empty() && out->errors.size() < 20) out->errors.push_back(std::move(error));
    out->last = Clock::now();
    out->cv.notify_all();
  };
  for (size_t i = 0; i < disputes.size(); ++i) {
    const Dispute& d = disputes[i];
    clients[i % kClientAddresses].connect(
        referee_url, [referee_key, d, finish, out](std::shared_ptr<Session> s, const std::string& error) {
          if (!s) return finish(false, false, "connect: " + error);
          auto got = std::make_shared<std::atomic<bool>>(false);
          s->set_handlers({[referee_key, d, got, finish](Session& session, std::vector<uint8_t> bytes) {
                             if (got->exchange(true)) return;
                             bool correct = false;
                             std::string error;
                             try {
                               const Verdict v = verify_verdict(bytes, referee_key);
                               correct = v.dispute_id == d.id &&
                                         v.winners == std::vector<uint8_t>{uint8_t(d.honest)} &&
                                         v.losers == std::vector<uint8_t>{uint8_t(1 - d.honest)} &&
                                         v.step == kFaultStep && v.node == kFaultNode;
                               if (!correct) error = "wrong verdict: " + v.detail;
                             } catch (const std::exception& e) {
                               error = std::string("bad verdict: ") + e.what();
                             }
                             session.close(CloseCode::Normal, "verdict received");
                             finish(true, correct, error);
                           },
                           [got, finish](Session&, const CloseInfo& info) {
                             if (!got->exchange(true))
                               finish(false, false, "closed without a verdict: " + to_string(info));
                           }});
          s->send(d.open);
          std::lock_guard lock(out->mu);
          out->sessions.push_back(s);
        });
  }
}

}  // namespace tribunal::load_bench
