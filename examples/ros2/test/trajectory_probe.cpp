// trajectory_probe - a test tool (built with BUILD_TESTING where rclcpp is
// found, not installed): subscribes to one trajectory_msgs/JointTrajectory
// topic (`trajectory`, remap it) and, on Ctrl-C, prints one line about what
// came: how many actions' trajectories (messages but holds), how many had
// each number of points, whether every point k was due at (k + 1) x the
// first point's time_from_start, and whether each trajectory foretold the
// next: when a message of p >= 2 points is followed by one of p - 1 (the
// same chunk, one step on), the second's point 0 must equal the first's
// point 1. Holds (frame_id "hold") are counted apart: how many, the longest
// run of them in a row, and whether the last message was one; and the
// span from the first message to the last. tests/ros2_nodes.sh reads that
// line.
#include <rclcpp/rclcpp.hpp>
#include <trajectory_msgs/msg/joint_trajectory.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <vector>

namespace {

std::vector<double> values(const trajectory_msgs::msg::JointTrajectoryPoint &p) {
  if (!p.positions.empty()) return p.positions;
  if (!p.velocities.empty()) return p.velocities;
  if (!p.accelerations.empty()) return p.accelerations;
  return p.effort;
}

double seconds(const builtin_interfaces::msg::Duration &d) { return d.sec + d.nanosec * 1e-9; }

}  // namespace

int main(int argc, char **argv) {
  rclcpp::init(argc, argv);
  auto node = std::make_shared<rclcpp::Node>("trajectory_probe");
  uint64_t messages = 0, bad_times = 0, chained = 0, chain_differs = 0, holds = 0;
  uint64_t hold_run = 0, longest_hold_run = 0;  // holds in a row
  bool last_was_hold = false;
  std::optional<std::chrono::steady_clock::time_point> first, last;
  std::map<std::size_t, uint64_t> by_points;
  std::size_t last_points = 0;
  std::vector<double> last_second;  // the last message's point 1
  auto sub = node->create_subscription<trajectory_msgs::msg::JointTrajectory>(
      "trajectory", rclcpp::QoS(1000), [&](std::shared_ptr<const trajectory_msgs::msg::JointTrajectory> m) {
        last = std::chrono::steady_clock::now();
        if (!first) first = last;
        // A hold (the node's frame_id "hold": stale data, or the final
        // hold when the run ends) is no part of a chunk.
        last_was_hold = m->header.frame_id == "hold";
        if (last_was_hold) {
          holds++;
          longest_hold_run = std::max(longest_hold_run, ++hold_run);
          last_points = 0;
          return;
        }
        hold_run = 0;
        messages++;
        by_points[m->points.size()]++;
        if (!m->points.empty()) {
          const double dt = seconds(m->points[0].time_from_start);
          for (std::size_t k = 0; k < m->points.size(); k++)
            if (dt <= 0 || std::fabs(seconds(m->points[k].time_from_start) - dt * static_cast<double>(k + 1)) > 1e-6)
              bad_times++;
          if (last_points >= 2 && m->points.size() == last_points - 1) {
            chained++;
            if (values(m->points[0]) != last_second) chain_differs++;
          }
        }
        last_points = m->points.size();
        last_second = m->points.size() >= 2 ? values(m->points[1]) : std::vector<double>{};
      });
  rclcpp::spin(node);
  std::printf("trajectory_probe: %llu messages; by points:", static_cast<unsigned long long>(messages));
  for (const auto &e : by_points) std::printf(" %zu:%llu", e.first, static_cast<unsigned long long>(e.second));
  const double span = first ? std::chrono::duration<double>(*last - *first).count() : 0.0;
  std::printf("; bad times %llu; chained %llu, differ %llu; holds %llu, longest run %llu, last a hold %s; "
              "span %.3f s\n",
              static_cast<unsigned long long>(bad_times), static_cast<unsigned long long>(chained),
              static_cast<unsigned long long>(chain_differs), static_cast<unsigned long long>(holds),
              static_cast<unsigned long long>(longest_hold_run), last_was_hold ? "yes" : "no", span);
  std::fflush(stdout);
  if (rclcpp::ok()) rclcpp::shutdown();
  return 0;
}
