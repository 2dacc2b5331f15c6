def on_page_markdown(markdown, page, config, files):
    return markdown
