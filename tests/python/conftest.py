# The hpref pytest plugin (@pytest.mark.hpref_cluster), as an installed hpref registers it
# through its pytest11 entry point; here the package comes from the build tree.
pytest_plugins = ["hpref.pytest_plugin"]
