"""The console's views: one module (one router) per page and its fragments."""
