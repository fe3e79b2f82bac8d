"""The cartpole example: cartpole_sim_node and plugrl_env_node.

    ros2 launch plugrl_ros2 cartpole.launch.py url:=ws://127.0.0.1:8000

Start the server first, e.g. libplugrl's reference server with its learner:

    plugrl serve --addr 127.0.0.1:8000 --policy cem --horizon 1 \
        --action-dim 1 --action-dtype float64 --seed 1

Parameters come from config/cartpole.yaml (params:=FILE for another);
url and max_episodes can be set on the command line.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    default_params = os.path.join(get_package_share_directory("plugrl_ros2"), "config", "cartpole.yaml")
    params = LaunchConfiguration("params")
    return LaunchDescription([
        DeclareLaunchArgument("params", default_value=default_params,
                              description="parameters YAML of both nodes"),
        DeclareLaunchArgument("url", default_value="ws://127.0.0.1:8000",
                              description="the PlugRL server"),
        DeclareLaunchArgument("max_episodes", default_value="0",
                              description="end the run after this many episodes; 0: no limit"),
        Node(package="plugrl_ros2", executable="cartpole_sim_node", name="cartpole_sim_node",
             parameters=[params], output="screen"),
        Node(package="plugrl_ros2", executable="plugrl_env_node", name="plugrl_env_node",
             parameters=[params, {"url": LaunchConfiguration("url"),
                                  "max_episodes": LaunchConfiguration("max_episodes")}],
             output="screen"),
    ])
