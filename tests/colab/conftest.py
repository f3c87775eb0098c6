from test_colab_env import kernel_name  # noqa: F401  (a fixture shared by both files)
