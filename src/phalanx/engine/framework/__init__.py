"""Session machinery: config, extension points, registry, session and statement."""
