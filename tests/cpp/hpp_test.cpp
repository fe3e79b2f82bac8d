// hpp_test.cpp - plugrl.hpp against a live `plugrl serve`:
//
//   hpp_test ws://HOST:PORT
//   hpp_test --width-change ws://HOST:PORT
//   hpp_test --garble-metadata ws://HOST:PORT
//
// The server must run with --action-dim 3 --horizon 4 --action-dtype float64
// --features reuse-feedback-obs --policy probe --stop-after 40 (CTest's "hpp"
// test starts it so). Checks errors as exceptions, metadata as optionals, the
// Observation builder, the low-level infer/feedback and ActionView, moves,
// and the Runner to the end of the run, with its episode callback.
//
// With --width-change the server is `plugrl-hostile --scenario width-change
// -d 3` (CTest's "hpp_width_change"), and the Runner's act rides a
// reconnect to a server of another action width; then a Client is
// destroyed in its own log callback during an infer that reconnects.
//
// With --busy the server is `plugrl-hostile --scenario slow-action
// --slow-every 2 --action-delay 500ms` (CTest's "hpp_busy"): a view made
// from a C-level infer's plugrl_action copies as before, and a second
// thread's infer that the library refuses (PLUGRL_BUSY, it ends nothing)
// leaves the first thread's view its client's last action (see
// test_busy_keeps_view).
//
// With --garble-metadata the server is `plugrl-hostile --scenario
// garble-metadata --h 2 --d 3` (CTest's "hpp_garble_metadata"), and every
// metadata getter must agree with the C call beneath it (see
// test_garble_metadata).
#include <plugrl.hpp>

#include <cstdio>
#include <iostream>
#include <memory>
#include <atomic>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

int checks = 0, failures = 0;

void check(bool ok, const char *what, int line) {
  checks++;
  if (!ok) {
    failures++;
    std::cerr << "hpp_test.cpp:" << line << ": FAIL: " << what << "\n";
  }
}
#define CHECK(cond) check((cond), #cond, __LINE__)

// Runs f, which must throw plugrl::Error with status want and a message.
template <class F>
void expect_error(plugrl_status want, F f, const char *what, int line) {
  checks++;
  try {
    f();
  } catch (const plugrl::Error &e) {
    if (e.status() != want || e.message().empty()) {
      failures++;
      std::cerr << "hpp_test.cpp:" << line << ": FAIL: " << what << " threw " << e.what() << ", want "
                << plugrl::status_str(want) << " with a message\n";
    } else {
      std::cout << "ok   threw " << e.what() << "\n";
    }
    return;
  }
  failures++;
  std::cerr << "hpp_test.cpp:" << line << ": FAIL: " << what << " did not throw\n";
}
#define EXPECT_ERROR(want, stmt) expect_error((want), [&] { stmt; }, #stmt, __LINE__)

/* f throws want (PLUGRL_INVALID_ARGUMENT unless said) from the wrapper's
** own check, whose message has part: a check the library would make too
** is not the one being tested. */
template <class F>
void expect_message(const char *part, F f, int line, plugrl_status want = PLUGRL_INVALID_ARGUMENT) {
  checks++;
  try {
    f();
  } catch (const plugrl::Error &e) {
    if (e.status() != want || e.message().find(part) == std::string::npos) {
      failures++;
      std::cerr << "hpp_test.cpp:" << line << ": FAIL: threw " << e.what() << ", want " << plugrl::status_str(want)
                << " with \"" << part << "\"\n";
    } else {
      std::cout << "ok   threw " << e.what() << "\n";
    }
    return;
  }
  failures++;
  std::cerr << "hpp_test.cpp:" << line << ": FAIL: did not throw\n";
}

/* The inline namespace: plugrl::X names the current layout's class. */
static_assert(std::is_same_v<plugrl::Client, plugrl::layout2::Client>, "plugrl::Client is the layout2 class");
static_assert(PLUGRL_HPP_LAYOUT == 2, "PLUGRL_HPP_LAYOUT names the inline namespace");

double probe_value(int64_t k, int64_t env, int64_t d) { return 10000.0 * k + 10.0 * env + d; }

void test_offline() {
  CHECK(plugrl::version() == PLUGRL_VERSION_STRING);
  CHECK(plugrl::version_number() == PLUGRL_VERSION_NUMBER);
  CHECK(plugrl::version_matches());
  CHECK(std::string(plugrl::status_str(PLUGRL_STOPPED)).size() > 0);
  CHECK(plugrl::dtype_v<double> == PLUGRL_DTYPE_F64);
  CHECK(plugrl::dtype_v<const uint8_t> == PLUGRL_DTYPE_U8);
  CHECK(plugrl::dtype_size(PLUGRL_DTYPE_I16) == 2);

  EXPECT_ERROR(PLUGRL_CONNECT_FAILED,
               plugrl::Client c(plugrl::Options("ws://127.0.0.1:1").max_reconnects(-1).connect_timeout_ms(2000)));
  EXPECT_ERROR(PLUGRL_INVALID_ARGUMENT, plugrl::Client c{plugrl::Options()});
  EXPECT_ERROR(PLUGRL_INVALID_ARGUMENT, plugrl::Client c{plugrl::Options("ws://127.0.0.1:1").dead_peer_timeout_ms(500)});
  EXPECT_ERROR(PLUGRL_INVALID_ARGUMENT, plugrl::Client c{plugrl::Options("ws://127.0.0.1:1").open_wait_ms(-2)});
  EXPECT_ERROR(PLUGRL_CONNECT_FAILED, plugrl::Client c{plugrl::Options("ws://127.0.0.1:1").open_wait_ms(200)});
  EXPECT_ERROR(PLUGRL_CONNECT_FAILED, plugrl::Client c(plugrl::Options("ws://127.0.0.1:1")
                                                            .max_reconnects(-1)
                                                            .connect_timeout_ms(2000)
                                                            .dead_peer_timeout_ms(-1)));

  plugrl::Observation o;
  EXPECT_ERROR(PLUGRL_INVALID_ARGUMENT, o.set_data("nope", nullptr));
  double x[4] = {0, 1, 2, 3};
  o.state("x", x, {2, 2}).text({"a", "b"});
  const plugrl_observation *c = o.c();
  CHECK(c->num_states == 1 && c->num_images == 0 && c->images == nullptr);
  CHECK(c->states[0].dtype == PLUGRL_DTYPE_F64 && c->states[0].ndim == 2 && c->states[0].shape[1] == 2);
  CHECK(std::string(c->text[1]) == "b");
  o.state("x", x, {4, 1});  // replaces
  // 2 strings for 4 rows: the library reads 4 pointers; the last 2 rows get "".
  c = o.c();
  CHECK(std::string(c->text[1]) == "b" && std::string(c->text[3]).empty());
  o.state("x", x, {1, 4});  // 2 strings for 1 row
  EXPECT_ERROR(PLUGRL_INVALID_ARGUMENT, o.c());
  o.state("x", x, {4, 1});
  CHECK(o.num_states() == 1 && o.c()->states[0].shape[0] == 4);
  {
    std::vector<double> v(3);
    plugrl::Observation p;
    EXPECT_ERROR(PLUGRL_INVALID_ARGUMENT, p.state("v", v, {2, 2}));  // 3 elements for a shape of 4
    EXPECT_ERROR(PLUGRL_INVALID_ARGUMENT, p.state("v", v, {-1, 3}));
    p.state("v", v, {3, 1});
    p.state("v", v, {2, 1});  // the first 2 of 3
    EXPECT_ERROR(PLUGRL_INVALID_ARGUMENT, plugrl::Observation().text({"t"}).c());  // text, no arrays
    // One env's text, at an env no message can hold: an int64_t -1 made
    // size_t wrapped resize(env + 1) to resize(0) and wrote past the vector.
    EXPECT_ERROR(PLUGRL_INVALID_ARGUMENT, p.text(static_cast<std::size_t>(int64_t(-1)), "x"));
    EXPECT_ERROR(PLUGRL_INVALID_ARGUMENT, p.text(std::size_t(1) << 20, "x"));
    CHECK(p.text().empty());
    p.text((std::size_t(1) << 20) - 1, "last");
    CHECK(p.text().size() == (std::size_t(1) << 20) && p.text().back() == "last");
    p.clear_text();
  }
  plugrl::Observation copy = o;
  CHECK(copy.c()->states[0].data == x && copy.c() != o.c());
}

void test_low_level(const std::string &url) {
  std::vector<std::string> logs;
  plugrl::Client client(plugrl::Options(url).receive_timeout_ms(10000).log(
      [&](int, const char *m) { logs.push_back(m); }));

  // Metadata.
  CHECK(client.action_dim() == 3);
  CHECK(client.action_horizon() == 4);
  CHECK(client.has_feature("reuse-feedback-obs"));
  CHECK(!client.has_feature("no-such-feature"));
  CHECK(!client.metadata_int("no such key").has_value());
  CHECK(!client.metadata_string("no such key").has_value());
  CHECK(!client.metadata_int("server").has_value());  // a string, not an int
  auto server = client.metadata_string("server");
  CHECK(server.has_value() && !server->empty());
  CHECK(client.metadata_json("action_dim") == std::optional<std::string>("3"));
  std::string all = client.metadata_json();
  CHECK(all.size() > 2 && all.front() == '{' && all.back() == '}');
  std::cout << "metadata " << all << "\n";

  // Two envs, env 0 and env 1.
  std::vector<double> t = {5, 7};
  plugrl::Observation obs;
  obs.state("t", t, {2, 1}).text({"env zero", "env one"});
  plugrl::ActionView a;
  CHECK(client.infer({0, 1}, {0, 0}, obs, a) == PLUGRL_OK);
  CHECK(a.horizon == 4 && a.num_envs == 2 && a.step_size == 3 && a.dtype == PLUGRL_DTYPE_F64);
  CHECK(a.shape.size() == 3 && a.shape[0] == 4 && a.shape[1] == 2 && a.shape[2] == 3);
  CHECK(a.env_ids.size() == 2 && a.env_ids[0] == 0 && a.env_ids[1] == 1);
  CHECK(a.size() == 24);
  bool exact = true;
  for (int64_t k = 0; k < 4; k++)
    for (int64_t j = 0; j < 2; j++)
      for (int64_t d = 0; d < 3; d++) exact = exact && a.step<double>(k, j)[d] == probe_value(k, j, d);
  CHECK(exact);
  EXPECT_ERROR(PLUGRL_INVALID_ARGUMENT, a.as<float>());
  EXPECT_ERROR(PLUGRL_INVALID_ARGUMENT, a.step<double>(4, 0));
  std::vector<float> f = client.action_copy<float>(a);
  CHECK(f.size() == 24 && f[(3 * 2 + 1) * 3 + 2] == static_cast<float>(probe_value(3, 1, 2)));
  std::vector<int32_t> ints;
  client.action_copy(a, ints);
  CHECK(ints.size() == 24 && ints[3] == 10);
  const plugrl::ActionView first = a; /* stale after the next infer */
  /* A count whose bytes wrap a size_t: (2^61 + 24) doubles made 192
  ** bytes, the action's own size, and the copy went through. */
  {
    double buf[24];
    expect_message("more bytes than a size_t holds",
                   [&] { client.action_copy(buf, (std::size_t(1) << 61) + 24); }, __LINE__);
  }

  // Caller errors: thrown, nothing sent.
  EXPECT_ERROR(PLUGRL_OUT_OF_ORDER, client.infer({0, 1}, {0, 0}, obs, a));
  /* The call ended the last view's life: a is empty, not left dangling. */
  CHECK(a.data == nullptr && a.size() == 0 && a.shape.size() == 0 && a.env_ids.size() == 0);
  EXPECT_ERROR(PLUGRL_INVALID_ARGUMENT, client.infer({0, 1}, {0}, obs, a));
  EXPECT_ERROR(PLUGRL_INVALID_ARGUMENT,
               client.feedback({0, 1}, {0, 0}, obs, {1.f}, {uint8_t(0), uint8_t(0)}, {uint8_t(0), uint8_t(0)}));
  /* Each length checked, not only the first that differs: the C call reads
  ** n of each, past the end of a shorter one. The wrapper's own message
  ** says which (the library, reading past the end, might answer anything). */
  {
    const std::vector<uint8_t> two = {0, 0};
    const plugrl::Span<const uint8_t> one(two.data(), 1); /* two[1] is there to be read, and says "no" */
    expect_message("reuse flags", [&] { client.infer({0, 1}, {0, 0}, obs, one, a); }, __LINE__);
    expect_message("the same length", [&] { client.feedback({0, 1}, {0, 0}, obs, {1.f, 1.f}, two, one); }, __LINE__);
    expect_message("the same length", [&] { client.feedback({0, 1}, {0, 0}, obs, {1.f, 1.f}, one, two); }, __LINE__);
  }
  EXPECT_ERROR(PLUGRL_INVALID_ARGUMENT,
               client.feedback({9}, {0}, plugrl::Observation().state("t", t.data(), {1, 1}), {1.f}, {uint8_t(0)},
                               {uint8_t(0)}));  // env 9 holds no chunk

  // Feedback for both; env 1's episode ends.
  std::vector<float> rewards = {4, 2};
  std::vector<uint8_t> term = {0, 1}, trunc = {0, 0}, mask = {0, 1};
  std::vector<double> returns = {0, 9};
  std::vector<int64_t> lengths = {0, 9};
  CHECK(client.feedback({0, 1}, {0, 0}, obs, rewards, term, trunc,
                        plugrl::EpisodeStats{returns, lengths, {}, mask}) == PLUGRL_OK);
  CHECK(client.can_reuse(0));
  CHECK(!client.can_reuse(1));  // its episode ended
  CHECK(!client.can_reuse(2));  // never fed back

  // Env 0 reuses its observation: only env 1's row is sent.
  std::vector<double> t1 = {0};
  plugrl::Observation only1;
  only1.state("t", t1, {1, 1});
  std::vector<uint8_t> reuse = {1, 0};
  CHECK(client.infer({0, 1}, {1, 0}, only1, reuse, a) == PLUGRL_OK);
  CHECK(a.num_envs == 2);
  /* A view from an earlier infer, of the same size: it sized the vector
  ** and the copy filled it with the new action. Now refused, as is an
  ** empty view; the current one copies. */
  expect_message("not this client's last action", [&] { client.action_copy<float>(first); }, __LINE__,
                 PLUGRL_OUT_OF_ORDER);
  expect_message("not this client's last action", [&] { client.action_copy<float>(plugrl::ActionView()); },
                 __LINE__, PLUGRL_OUT_OF_ORDER);
  CHECK(client.action_copy<float>(a).size() == 24);
  CHECK(client.feedback({0, 1}, {1, 0}, obs, rewards, trunc, trunc) == PLUGRL_OK);

  // Live statistics: one reused row so far, round trips measured.
  plugrl_statistics st = client.stats();
  CHECK(st.size == sizeof st && st.exchanges >= 2 && st.feedbacks >= 1 && st.rows_reused == 1);  // the last may be held
  CHECK(st.rtt_p50_us > 0 && st.rtt_p50_us <= st.rtt_p99_us && st.rtt_p99_us <= st.rtt_max_us);
  CHECK(st.episodes == 0 && st.env_steps == 0);

  // Moves: the moved-from client is empty, and calls on it throw CLOSED.
  plugrl::Client moved(std::move(client));
  CHECK(!client.is_open() && moved.is_open());  // NOLINT(bugprone-use-after-move)
  EXPECT_ERROR(PLUGRL_CLOSED, client.action_dim());
  CHECK(moved.action_dim() == 3);
  moved.close();
  EXPECT_ERROR(PLUGRL_CLOSED, moved.has_feature("x"));
  EXPECT_ERROR(PLUGRL_CLOSED, moved.stats());
}

// A Runner destroyed inside its own episode callback: the library refuses
// to free it there (PLUGRL_BUSY), so the wrapper leaves it and its
// callback's state to the library instead of freeing the state the same
// report calls again (a use after free, shown by ASan, before).
void test_destroy_in_callback(const std::string &url) {
  const std::size_t n = 2;
  plugrl::Client client(plugrl::Options(url).receive_timeout_ms(10000));
  std::optional<plugrl::Runner> runner;
  runner.emplace(client, n);
  int calls = 0;
  runner->on_episode([&](const plugrl::Episode &) {
    calls++;
    runner.reset();  // inside the report that calls this twice
  });
  std::vector<double> t(n, 0), a(n * 3, 0), rewards(n, 1), actions;
  std::vector<uint8_t> term(n, 1), trunc(n, 0);  // both envs end at once
  plugrl::Observation obs;
  obs.state("t", t, {static_cast<int64_t>(n), 1}).state("a", a, {static_cast<int64_t>(n), 3});
  plugrl::Runner &r = *runner;
  CHECK(r.act(obs, actions));
  r.report(obs, rewards, term, trunc);
  CHECK(calls == static_cast<int>(n));
  CHECK(!runner.has_value());
}

void test_runner(const std::string &url) {
  const std::size_t n = 3;
  plugrl::Client client(plugrl::Options(url).receive_timeout_ms(10000));
  plugrl::Runner runner(client, n);
  CHECK(runner.num_envs() == n);
  CHECK(runner.step_size() == 3);

  long long episodes = 0, steps = 0;
  bool throw_once = true;
  runner.on_episode([&](const plugrl::Episode &e) {
    if (throw_once) {
      throw_once = false;
      throw std::runtime_error("thrown by the episode callback");
    }
    episodes++;
    CHECK(e.length == 3 + 2 * (e.env % 3) && e.episode_return == static_cast<double>(e.length));
  });

  std::vector<double> t(n, 0), a(n * 3, 0), rewards(n, 1);
  std::vector<uint8_t> term(n, 0), trunc(n, 0);
  plugrl::Observation obs;
  obs.state("t", t, {static_cast<int64_t>(n), 1}).state("a", a, {static_cast<int64_t>(n), 3});
  std::vector<double> actions;
  EXPECT_ERROR(PLUGRL_INVALID_ARGUMENT, runner.report(obs, rewards, term, std::vector<uint8_t>(2, 0)));
  /* Success flags are optional, but when given, one per env. */
  EXPECT_ERROR(PLUGRL_INVALID_ARGUMENT, runner.report(obs, rewards, term, trunc, std::vector<uint8_t>(n - 1, 0)));
  /* The same for act's (pointer, count): (2^61 + 9) doubles made 72 bytes,
  ** 3 envs x 3, and the act went through, sending an infer. */
  {
    double buf[9];
    expect_message("more bytes than a size_t holds", [&] { runner.act(obs, buf, (std::size_t(1) << 61) + 9); },
                   __LINE__);
  }
  bool thrown = false;
  for (;;) {
    if (!runner.act(obs, actions)) break;
    CHECK(actions.size() == n * 3);
    {
      /* The rest of the last env's chunk starts with the step act gave it
      ** (probe policy, H = 4: values 10000 k + 10 env + d). */
      std::vector<double> plan;
      int64_t left = runner.chunk(static_cast<int64_t>(n - 1), plan);
      CHECK(left >= 1 && left <= 4 && plan.size() == static_cast<std::size_t>(left) * 3);
      for (std::size_t d = 0; d < 3 && !plan.empty(); d++) CHECK(plan[d] == actions[(n - 1) * 3 + d]);
      for (int64_t k = 1; k < left; k++) CHECK(plan[static_cast<std::size_t>(k) * 3] == plan[0] + 10000.0 * static_cast<double>(k));
    }
    for (std::size_t i = 0; i < n; i++) {
      t[i] += 1;
      for (std::size_t d = 0; d < 3; d++) a[i * 3 + d] = actions[i * 3 + d];
      term[i] = t[i] == static_cast<double>(3 + 2 * (i % 3));
    }
    steps++;
    bool more = true;
    try {
      more = runner.report(obs, rewards, term, trunc);
    } catch (const std::runtime_error &e) {
      CHECK(std::string(e.what()) == "thrown by the episode callback");
      thrown = true;
    }
    if (!more) break;
    for (std::size_t i = 0; i < n; i++)
      if (term[i]) t[i] = 0;
  }
  std::cout << "runner: " << steps << " steps, " << episodes << " episodes counted until the server stopped\n";
  CHECK(thrown);
  CHECK(steps > 10 && episodes > 3);
  // Stopped for good: act keeps saying so.
  CHECK(!runner.act(obs, actions));
  plugrl_statistics st = runner.stats();
  CHECK(st.env_steps == static_cast<uint64_t>(steps) * n && st.episodes >= static_cast<uint64_t>(episodes));
  CHECK(st.exchanges > 0 && st.exchanges == client.stats().exchanges);

  plugrl::Runner other(std::move(runner));
  CHECK(runner.handle() == nullptr && other.handle() != nullptr);  // NOLINT(bugprone-use-after-move)
  EXPECT_ERROR(PLUGRL_CLOSED, runner.step_size());
  EXPECT_ERROR(PLUGRL_CLOSED, runner.stats());
}

// A reconnect inside an act to a server of another action width
// (plugrl-hostile width-change -d 3: action_dim 3, a resync at the second
// infer, which the second act sends, then action_dim 5): the library keeps
// the chunk and refuses the 3-wide buffer, and act resizes and acts again,
// giving the actions at the new width; the run goes on at it.
void test_width_change(const std::string &url) {
  const std::size_t n = 2;
  plugrl::Client client(plugrl::Options(url).receive_timeout_ms(10000));
  plugrl::Runner runner(client, n);
  CHECK(runner.step_size() == 3);
  std::vector<double> t(n, 0), rewards(n, 0);
  std::vector<uint8_t> term(n, 0), trunc(n, 0);
  plugrl::Observation obs;
  obs.state("t", t, {static_cast<int64_t>(n), 1});
  std::vector<float> actions;
  for (std::size_t step = 0; step < 5; step++) {
    const std::size_t width = step == 0 ? 3 : 5;
    CHECK(runner.act(obs, actions));
    CHECK(actions.size() == n * width);
    CHECK(runner.step_size() == static_cast<int64_t>(width));
    CHECK(runner.report(obs, rewards, term, trunc));
  }
  CHECK(client.action_dim() == 5);
  plugrl_statistics st = runner.stats();
  CHECK(st.reconnects == 1 && st.reconnects_resync == 1);
  CHECK(st.env_steps == 5 * n);
  std::cout << "width change: 5 steps of " << n << " envs, the last 4 at width 5, " << st.reconnects
            << " reconnect\n";
}

// A Runner destroyed inside its client's log callback, during an act that
// rides a reconnect (width-change's third connection resyncs at the second
// infer, and the fourth is 5 wide): the library refuses the free there, so
// the runner and its state are left to the library, and act must touch
// nothing of the destroyed object after its C call, neither to learn the
// new width nor to act again at it (a heap-use-after-free under ASan
// before: act read the Runner's handle and num_envs after the call).
void test_destroy_runner_in_log(const std::string &url) {
  const std::size_t n = 2;
  std::unique_ptr<plugrl::Runner> runner;
  int destroyed = 0;
  plugrl::Client client(plugrl::Options(url).receive_timeout_ms(10000).log([&](int, const char *msg) {
    if (runner && std::string(msg).find("reconnecting") != std::string::npos) {
      destroyed++;
      runner.reset();
    }
  }));
  runner = std::make_unique<plugrl::Runner>(client, n);
  std::vector<double> t(n, 0), rewards(n, 0);
  std::vector<uint8_t> term(n, 0), trunc(n, 0);
  plugrl::Observation obs;
  obs.state("t", t, {static_cast<int64_t>(n), 1});
  std::vector<float> actions;
  plugrl::Runner &r = *runner;
  CHECK(r.act(obs, actions) && actions.size() == n * 3);
  CHECK(r.report(obs, rewards, term, trunc));
  CHECK(r.act(obs, actions));  // r is destroyed during this act, which goes on at width 5
  CHECK(destroyed == 1 && !runner);
  CHECK(actions.size() == n * 5);
}

// A Client destroyed inside its own log callback, during an infer that
// fails (the server, width-change's fifth connection, closes with a resync
// at the second infer; the client logs that it reconnects, and cannot:
// max_reconnects -1). The library refuses the close there, so the handle
// and the callback's state are leaked, and infer must touch nothing of the
// destroyed object after its C call, also to say why it failed
// (hpp_width_change runs under ASan: a heap-use-after-free otherwise).
void test_destroy_client_in_log(const std::string &url) {
  std::unique_ptr<plugrl::Client> client;
  int destroyed = 0;
  client = std::make_unique<plugrl::Client>(
      plugrl::Options(url).receive_timeout_ms(10000).max_reconnects(-1).log([&](int, const char *msg) {
        if (client && std::string(msg).find("reconnecting") != std::string::npos) {
          destroyed++;
          client.reset();
        }
      }));
  std::vector<double> t(1, 0);
  std::vector<float> reward(1, 0);
  std::vector<uint8_t> done(1, 0);
  plugrl::Observation obs;
  obs.state("t", t, {1, 1});
  plugrl::ActionView action;
  plugrl::Client &c = *client;
  CHECK(c.infer({0}, {0}, obs, action) == PLUGRL_OK);
  CHECK(c.feedback({0}, {0}, obs, reward, done, done) == PLUGRL_OK);
  /* c is destroyed by the time the failed reconnect (never allowed) throws. */
  EXPECT_ERROR(PLUGRL_CONNECT_FAILED, c.infer({0}, {1}, obs, action));
  CHECK(destroyed == 1);
  CHECK(!client);
}

}  // namespace

// raw_copy is the C getter f for key (NULL: the whole map, for
// plugrl_metadata_json) through the raw handle, with its size protocol:
// the value, or std::nullopt when absent; *status is the call's status.
using CopyFn = plugrl_status (*)(plugrl_client *, const char *, char *, std::size_t, std::size_t *, int *);
std::optional<std::string> raw_copy(plugrl_client *h, CopyFn f, const char *key, plugrl_status *status) {
  std::size_t length = 0;
  int present = 0;
  *status = f(h, key, nullptr, 0, &length, &present);
  if (*status != PLUGRL_OK || !present) return std::nullopt;
  std::string buf(length + 1, '\0');
  *status = f(h, key, &buf[0], buf.size(), &length, &present);
  if (*status != PLUGRL_OK || !present) return std::nullopt;
  buf.resize(length);
  return buf;
}

// The wrapper's JSON getter (key empty: the whole map) against the C call's
// outcome: the same value, or an Error of the same status.
template <class F>
bool json_agrees(F getter, const std::optional<std::string> &raw, plugrl_status status) {
  try {
    auto got = getter();
    return status == PLUGRL_OK && got == raw;
  } catch (const plugrl::Error &e) {
    return status != PLUGRL_OK && e.status() == status && !e.message().empty();
  }
}

// --garble-metadata: 150 opens against `plugrl-hostile --scenario
// garble-metadata`, whose metadata is drawn at random for each connection
// (keys absent, in other encodings or of other types; strings empty,
// 64 KiB, not UTF-8 or holding a NUL; extra keys of every msgpack type and
// nests past any JSON reader's depth; about one map in five no metadata
// message at all). Each Client is constructed or throws
// PLUGRL_PROTOCOL_ERROR with a message, and on each one every getter of
// the wrapper, on every key the generator writes, gives what the C call
// beneath it gives: the same integer, the same bytes, the same JSON or an
// Error of the same status.
void test_garble_metadata(const std::string &url) {
  const char *keys[] = {"protocol_version", "action_horizon", "action_dim", "server", "algorithm", "policy",
                        "features", "x0", "x1", "x2", "x3", "x4", "x5"};
  int opened = 0, refused = 0, strings = 0, with_nul = 0, no_json = 0, bad = 0;
  for (int i = 0; i < 150 && bad < 5; i++) {
    std::unique_ptr<plugrl::Client> client;
    try {
      client = std::make_unique<plugrl::Client>(
          plugrl::Options(url).connect_timeout_ms(10000).metadata_timeout_ms(10000));
    } catch (const plugrl::Error &e) {
      refused++;
      if (e.status() != PLUGRL_PROTOCOL_ERROR || e.message().empty()) {
        bad++;
        CHECK(e.status() == PLUGRL_PROTOCOL_ERROR && !e.message().empty());
        std::cerr << "open " << i << " threw " << e.what() << "\n";
      }
      continue;
    }
    opened++;
    plugrl_client *h = client->handle();
    const int bad_before = failures;
    for (const char *key : keys) {
      int64_t v = 0;
      int present = 0;
      CHECK(plugrl_metadata_int(h, key, &v, &present) == PLUGRL_OK);
      std::optional<int64_t> got = client->metadata_int(key);
      CHECK(got.has_value() == (present != 0) && (!got || *got == v));
      plugrl_status s;
      std::optional<std::string> raw = raw_copy(h, &plugrl_metadata_string, key, &s);
      CHECK(s == PLUGRL_OK);
      CHECK(client->metadata_string(key) == raw);
      if (raw) {
        strings++;
        with_nul += raw->find('\0') != std::string::npos;
      }
      raw = raw_copy(h, &plugrl_metadata_json, key, &s);
      no_json += s != PLUGRL_OK;
      CHECK(json_agrees([&] { return client->metadata_json(std::string(key)); }, raw, s));
    }
    plugrl_status s;
    std::optional<std::string> whole = raw_copy(h, &plugrl_metadata_json, nullptr, &s);
    CHECK(json_agrees([&] { return std::optional<std::string>(client->metadata_json()); },
                      whole ? whole : std::optional<std::string>("{}"), s));
    for (const char *feature : {"reuse-feedback-obs", "x"}) {
      int present = 0;
      CHECK(plugrl_metadata_has_feature(h, feature, &present) == PLUGRL_OK);
      CHECK(client->has_feature(feature) == (present != 0));
    }
    CHECK(client->action_dim() == client->metadata_int("action_dim"));
    CHECK(client->action_horizon() == client->metadata_int("action_horizon"));
    if (failures != bad_before) {
      bad++;
      std::cerr << "open " << i << ": the wrapper and the C API disagree (above)\n";
    }
  }
  CHECK(opened > 0 && refused > 0 && strings > 0 && with_nul > 0);
  std::cout << "ok   garbled metadata: " << opened << " opened, " << refused << " refused; " << strings
            << " strings (" << with_nul << " holding a NUL), " << no_json
            << " values with no JSON, each getter as the C API\n";
}

// The view action_copy takes is the client's last action as the library
// knows it. (1) A view made from a plugrl_action of a C-level infer on the
// client's handle (the public ActionView(const plugrl_action &)) is the
// last action: it copies, as it did before views carried an infer's id.
// (2) A second thread's infer while the first's waits for its action
// (slow-action holds every second infer 500 ms) is refused by the library
// with PLUGRL_BUSY, which ends no action: the first thread's view is
// still the last action and copies. Before, the wrapper counted the
// refused infer too, and refused the view (PLUGRL_OUT_OF_ORDER).
void test_busy_keeps_view(const std::string &url) {
  plugrl::Client client(plugrl::Options(url).receive_timeout_ms(10000));
  std::vector<double> t = {5};
  plugrl::Observation obs;
  obs.state("t", t, {1, 1});
  std::vector<float> rewards = {1};
  std::vector<uint8_t> no = {0};

  // (1) The connection's first infer, answered at once.
  {
    const int64_t env = 0, step = 0;
    plugrl_action ca{};
    CHECK(plugrl_infer(client.handle(), &env, &step, 1, obs.c(), nullptr, &ca) == PLUGRL_OK);
    const plugrl::ActionView v(ca);
    try {
      CHECK(client.action_copy<float>(v).size() == v.size());
    } catch (const plugrl::Error &e) {
      check(false, e.what(), __LINE__);
    }
    CHECK(client.feedback({0}, {0}, obs, rewards, no, no) == PLUGRL_OK);
  }

  // (2) The second, held 500 ms; meanwhile this thread's infers until one
  // is refused with PLUGRL_BUSY (an infer of no envs: the library refuses
  // it as an invalid argument if it gets that far).
  std::atomic<bool> done{false};
  plugrl::ActionView a;
  plugrl_status s = PLUGRL_SERVER_ERROR; /* until the infer says */
  std::string thrown;
  std::thread first([&] {
    for (;;) {
      try {
        s = client.infer({0}, {1}, obs, a);
        break;
      } catch (const plugrl::Error &e) {
        if (e.status() != PLUGRL_BUSY) {
          thrown = e.what();
          break;
        }
      }
    }
    done = true;
  });
  bool busy = false;
  plugrl::ActionView other;
  while (!busy && !done) {
    try {
      client.infer({}, {}, obs, other);
    } catch (const plugrl::Error &e) {
      busy = e.status() == PLUGRL_BUSY;
    }
    if (!busy) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  first.join();
  check(thrown.empty(), thrown.c_str(), __LINE__);
  CHECK(s == PLUGRL_OK);
  if (!busy) {
    std::cout << "skip the held infer answered before a second thread's infer was refused\n";
    return;
  }
  std::cout << "ok   a second thread's infer refused with PLUGRL_BUSY while the first waited\n";
  try {
    CHECK(client.action_copy<float>(a).size() == a.size());
  } catch (const plugrl::Error &e) {
    check(false, e.what(), __LINE__);
  }
}

int main(int argc, char **argv) {
  const bool width_change = argc == 3 && std::string(argv[1]) == "--width-change";
  const bool garble = argc == 3 && std::string(argv[1]) == "--garble-metadata";
  const bool busy = argc == 3 && std::string(argv[1]) == "--busy";
  if (argc != 2 && !width_change && !garble && !busy) {
    std::cerr << "usage: hpp_test [--width-change | --garble-metadata | --busy] ws://HOST:PORT\n";
    return 2;
  }
  std::string url = argv[argc - 1];
  try {
    if (garble) {
      test_garble_metadata(url);
    } else if (busy) {
      test_busy_keeps_view(url);
    } else if (width_change) {
      test_width_change(url);
      test_destroy_runner_in_log(url); /* the server's third and fourth connections */
      test_destroy_client_in_log(url); /* the fifth */
    } else {
      test_offline();
      test_low_level(url);
      test_destroy_in_callback(url);
      test_runner(url);
    }
  } catch (const std::exception &e) {
    failures++;
    std::cerr << "hpp_test: unexpected exception: " << e.what() << "\n";
  }
  std::cout << checks << " checks, " << failures << " failed\n";
  return failures ? 1 : 0;
}
